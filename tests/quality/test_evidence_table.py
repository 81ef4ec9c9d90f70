"""A stored review's evidence read back as columns looks up as the `WorkerEvidence` objects it was
written from (the same floats, None kept None), in the same order."""

from __future__ import annotations

import json
import random
from dataclasses import asdict

import pytest

from campaign.quality.evidence import WorkerEvidence
from campaign.quality.evidence_table import EvidenceTable


def _evidence(rng: random.Random, n: int) -> dict[str, WorkerEvidence]:
    out = {}
    for _ in range(n):
        w = f"A{rng.randrange(16**12):012X}"
        seen = rng.randint(0, 9)
        out[w] = WorkerEvidence(worker=w, labels=rng.randint(0, 5000), shared_items=rng.randint(0, 5000),
                                correlation=None if rng.random() < 0.2 else rng.uniform(-1, 1) * (rng.random() < 0.9),
                                traps_seen=seen, traps_passed=rng.randint(0, seen), constant=rng.random() < 0.1,
                                competence=None if rng.random() < 0.7 else rng.random())
    return out


@pytest.mark.parametrize("seed", range(4))
def test_the_table_reads_back_what_was_stored(seed: int) -> None:
    want = _evidence(random.Random(seed), 300)
    stored = json.loads(json.dumps({w: asdict(e) for w, e in want.items()}))  # as `_dump` writes it and the store gives it back
    got = EvidenceTable(stored)
    assert list(got) == list(want) and len(got) == len(want)
    assert dict(got.items()) == want and got == want  # field by field: the very same floats, None kept
    assert all(got[w].worker == w for w in want)
    assert "nobody" not in got and got.get("nobody") is None
    with pytest.raises(KeyError):
        got["nobody"]


def test_a_worker_costs_a_row_not_an_object() -> None:
    stored = {w: asdict(e) for w, e in _evidence(random.Random(9), 2000).items()}
    got = EvidenceTable(stored)
    columns = sum(getattr(got, a).nbytes for a in ("_labels", "_shared", "_seen", "_passed", "_constant", "_corr",
                                                    "_corr_known", "_competence", "_competence_known"))
    assert columns / len(got) <= 60
