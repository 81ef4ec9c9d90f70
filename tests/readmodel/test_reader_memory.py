"""What a Reader kept for a run holds for the alerts of every campaign a daemon runs: per answer
(`Arrivals`, one typed column per figure, grown in place) and per worker (`EvidenceFigures`)."""

from __future__ import annotations

import numpy as np
import pytest

from campaign.readmodel.snapshot import Arrivals


def _fill(a: Arrivals, chunks: list[int]) -> None:
    k = 0
    for size in chunks:
        a._append([float(k + i) for i in range(size)], [(k + i) % 3 for i in range(size)], [(k + i) % 7 for i in range(size)])
        k += size


def test_answers_added_in_pieces_read_as_if_added_at_once() -> None:
    once, pieces = Arrivals(), Arrivals()
    _fill(once, [5000])
    _fill(pieces, [1, 999, 0, 1500, 2500])
    assert once.count == pieces.count == 5000
    for a, b in zip(once.arrays(), pieces.arrays()):
        assert a.tolist() == b.tolist()
    t, s, w = pieces.arrays()
    assert t[4999] == 4999.0 and s[4999] == 4999 % 3 and w[4999] == 4999 % 7


def test_columns_grow_by_a_quarter_not_by_doubling() -> None:
    a = Arrivals()
    for _ in range(200):
        _fill(a, [1000])
    assert a.count == 200_000
    assert len(a._t) <= a.count * Arrivals.GROWTH + 1024
    held = sum(col.nbytes for col in (a._t, a._s, a._w))
    assert held / a.count <= 14 * Arrivals.GROWTH + 1


def test_the_arrays_handed_out_are_read_only_views_that_stay_valid() -> None:
    a = Arrivals()
    _fill(a, [10])
    t, _, _ = a.arrays()
    with pytest.raises(ValueError):
        t[0] = 99.0
    _fill(a, [5000])  # grows: the view handed out earlier still reads what it read
    assert t.tolist() == [float(i) for i in range(10)]
    assert np.shares_memory(a.arrays()[0], a._t)


def test_evidence_figures_read_as_the_stored_text_does_for_the_keys_the_views_use() -> None:
    import json

    from campaign.readmodel.snapshot import EvidenceFigures

    stored = {"labels": 312, "shared_items": 310, "correlation": 0.0, "traps_seen": 0, "traps_passed": 0, "constant": False,
              "stages": {"likert": {"labels": 312, "correlation": None, "traps_seen": 3, "traps_passed": 2,
                                    "excluded": False, "reason": None},
                         "rank": {"labels": 4, "excluded": True, "reason": "spam"}}}
    got = EvidenceFigures.parse(json.dumps(stored))
    used = ("correlation", "labels", "traps_seen", "traps_passed", "excluded")
    assert {k: v for k, v in got.items() if k != "stages"} == {k: stored[k] for k in used if k in stored}
    assert got.get("excluded", "absent") == "absent" and "excluded" not in got  # not in the text: missing
    assert got["correlation"] == 0.0 and got["traps_seen"] == 0  # falsy figures are there
    stages = got.get("stages")
    assert stages is not None and set(stages) == {"likert", "rank"}
    assert dict(stages["likert"]) == {"labels": 312, "traps_seen": 3, "traps_passed": 2, "excluded": False}
    assert stages["rank"].get("excluded") is True and stages["rank"].get("correlation") is None
    with pytest.raises(KeyError):
        got["reason"]
    assert dict(EvidenceFigures.parse("[1, 2]")) == {}  # not an object: no figures
