"""The cost estimate of a long ranking stage replays its first `REPLAY_BATCHES` batches and extrapolates
the rest (`campaign.estimate.stage_batches`). Before, it replayed every batch: a 47,000-proposition
Likert stage's top 30 tie with ~2,300 more items, a ranking over them plans 550,000 pairs, and
`campaign validate` ran for more than ten minutes (measured by hand; now 6 s)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import campaign.estimate as estimate
from campaign.spec import load_spec
from campaign.tasks.ranking import RankingKind
from tests.support.specs import NO_CROWD, campaign, write_spec


def _two_stage(tmp_path: Path, n: int) -> Path:
    r = random.Random(1)
    lines = ["id\ttext"] + [f"p{i}\tproposition number {i} {r.random():.6f}" for i in range(n)]
    (tmp_path / "props.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    stages = [{"name": "likert", "kind": "likert"},
              {"name": "ranking", "kind": "ranking", "source": "likert", "shortlist": 30, "keep": 15,
               "batch_pairs": 40, "pair_budget": 0.2}]
    return write_spec(tmp_path / "c.yaml", campaign("two", stages=stages, budget="5000.00", crowd=NO_CROWD,
                                                    propositions="props.tsv"))


def test_the_extrapolated_estimate_is_the_full_replays_and_plans_a_bounded_number_of_batches(tmp_path, monkeypatch):
    c = load_spec(_two_stage(tmp_path, 5000)).campaigns[0]
    items = estimate.plan_items(c)
    calls = [0]
    plan_batch = RankingKind.plan_batch

    def counted(self, stage, inp):
        calls[0] += 1
        return plan_batch(self, stage, inp)

    monkeypatch.setattr(RankingKind, "plan_batch", counted)
    short = estimate.estimate_campaign(c, items)
    short_calls, replayed = calls[0], estimate.REPLAY_BATCHES
    monkeypatch.setattr(estimate, "REPLAY_BATCHES", 10**9)  # every batch replayed, as before
    calls[0] = 0
    full = estimate.estimate_campaign(c, items)
    ranking_short, ranking_full = short.stages[1], full.stages[1]
    assert ranking_full.hits > 4 * replayed  # 4 HITs a batch: long enough to be extrapolated
    assert ranking_short.hits == ranking_full.hits and ranking_short.pairs == ranking_full.pairs
    assert short.total == full.total
    assert short_calls <= 2 * (replayed + 1) < calls[0]  # the top of the ties, then their mean


@pytest.mark.parametrize("n", [200])
def test_a_short_stage_is_still_replayed_to_its_end(tmp_path, n):
    c = load_spec(_two_stage(tmp_path, n)).campaigns[0]
    batches, pairs = estimate.stage_batches(c, c.stages[1], estimate.plan_items(c), 0)
    assert len(batches) < estimate.REPLAY_BATCHES and pairs is not None and pairs >= 1
