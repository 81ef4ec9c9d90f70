"""Nugget quality control: span boundaries as evidence, and random spans excluded beyond the cap."""

from __future__ import annotations

import csv
import dataclasses

import numpy as np
import pytest

from campaign.crowd.models import make_pool
from campaign.quality.evidence import gather
from campaign.quality.review import PolicyConfig, judge
from campaign.tasks import get as get_kind
from campaign.tasks.kind import ReviewedJudgment
from campaign.tasks.nuggets import NuggetStage, boundary_labels, nugget_answer, parse
from tests.support.paths import WATER


def test_parse_keeps_sentence_length_for_evidence():
    js = parse([("nuggets", "[[0, 0, 2]]")], ["a", "b"], ["one two three four", "five six seven"])
    assert [j.extra["tokens"] for j in js] == [4, 3]


def test_boundary_labels_mark_starts_and_ends_over_every_word():
    labs = boundary_labels("s1", "w", "a", [[1, 3]], 5)
    got = {l.item: l.value for l in labs}
    assert len(labs) == 10 and got["s1#s1"] == 1.0 and got["s1#e3"] == 1.0
    assert sum(got.values()) == 2.0
    assert {l.value for l in boundary_labels("s1", "w", "a", [], 4)} == {0.0}  # nothing marked: explicit zeros


def test_nugget_kind_is_policed_with_labels_and_no_traps():
    kind = get_kind("nuggets")
    stage = NuggetStage(name="nuggets", kind="nuggets")
    rows = [ReviewedJudgment(item_key="s1", value=1.0, worker_id="w", assignment_id="a", hit_key="h", shown=7,
                             extra={"spans": [[0, 2]], "tokens": 4})]
    got = kind.evidence(stage, rows)
    assert kind.policed and kind.low_agreement_absolute and got is not None
    labels, traps = got
    assert traps == [] and len(labels) == 8


def _crowd(seed: int, spammers: int) -> tuple[list, set[str]]:
    docs: dict[str, list[tuple[str, str]]] = {}
    with open(WATER / "documents.tsv") as f:
        for r in csv.DictReader(f, delimiter="\t"):
            docs.setdefault(r["doc"], []).append((r["id"], r["text"]))
    with open(WATER / "sentence_truth.tsv") as f:
        truth = {r["id"]: float(r["importance"]) for r in csv.DictReader(f, delimiter="\t")}
    hits = [ss[i:i + 7] for ss in docs.values() for i in range(0, len(ss), 7)]
    pool = make_pool(40, seed, mix={"diligent": 0.7, "noisy": 0.2, "biased": 0.1})
    pool = [dataclasses.replace(w, kind="random_spammer") if i < spammers else w for i, w in enumerate(pool)]
    rng = np.random.default_rng(seed)
    labels = []
    for h, ss in enumerate(hits):
        for wi in rng.choice(len(pool), 7, replace=False):
            w = pool[wi]
            spans = nugget_answer(w, [t for _, t in ss], [truth[k] for k, _ in ss], 3, rng)
            for s, (k, t) in enumerate(ss):
                labels += boundary_labels(k, w.worker_id, f"{h}-{wi}", [sp[1:] for sp in spans if sp[0] == s], len(t.split()))
    return labels, {w.worker_id for w in pool if w.is_spammer}


@pytest.mark.slow
def test_random_spans_are_excluded_and_honest_workers_kept():
    """A quarter of the crowd marking random spans: the nugget policy excludes nearly all of them (the
    capped policy of Likert, without traps, excluded one or two) and at most one honest worker."""
    for seed in (1, 2):
        labels, spam = _crowd(seed, 10)
        ev = gather(labels, [], 5)
        capped = judge(ev, PolicyConfig()).excluded
        excluded = judge(ev, PolicyConfig(low_agreement_absolute=True)).excluded
        assert len(excluded & spam) >= 0.8 * len(spam) > len(capped & spam)
        assert len(excluded - spam) <= 1


@pytest.mark.slow
def test_clean_crowd_loses_at_most_one_worker():
    labels, spam = _crowd(3, 0)
    assert not spam
    assert len(judge(gather(labels, [], 5), PolicyConfig(low_agreement_absolute=True)).excluded) <= 1
