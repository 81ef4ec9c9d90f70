"""A single-stage `task: kind: ranking` campaign runs to `finished` (it used to fail on every tick with
AttributeError): with no earlier stage, the stage ranks every input item in adaptive batches."""

from __future__ import annotations

import csv

import pytest
from sqlmodel import select

from campaign.store import CampaignRow, EventRow, HitRow, Store
from tests.support.specs import campaign, first_propositions, run_in_process, simulated


@pytest.mark.slow
def test_a_ranking_only_campaign_finishes_with_bradley_terry_scores(tmp_path):
    task = {"kind": "ranking", "keep": 5, "batch_pairs": 20, "pair_budget": 0.5}
    code, state = run_in_process(tmp_path, campaign("rank-only", task=task, budget="20.00", propositions=first_propositions(tmp_path, 12),
                                                    crowd=simulated(15, speed=3600, arrival_span="10m")), seed=2, max_seconds=150)
    assert code == 0

    store = Store.open(state)
    with store.session() as s:
        assert s.get(CampaignRow, "rank-only").status == "finished"
        hits = s.exec(select(HitRow).where(HitRow.campaign == "rank-only")).all()
        errors = s.exec(select(EventRow).where(EventRow.campaign == "rank-only", EventRow.kind == "step_error")).all()
    store.close()
    assert not errors, errors[0].message
    assert len({h.batch for h in hits}) >= 2  # adaptive: more than one batch
    with open(state / "rank-only" / "scores.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 12
    assert [r["rank"] for r in rows] == [str(i) for i in range(1, 13)]
    assert all(r["score"] and r["uncertainty"] and int(r["comparisons"]) > 0 and r["text"] for r in rows)
    assert sum(r["kept"] == "True" for r in rows) == 5
    assert all(r["likert_score"] == "" for r in rows)  # no earlier stage, no Likert evidence
    scores = [float(r["score"]) for r in rows]
    assert scores == sorted(scores, reverse=True)
