"""Quality control reads only the labels stored since its last run and sees exactly what a full
read sees."""

from __future__ import annotations

import dataclasses

from campaign.steps.collect import collect
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending
from campaign.steps.quality_pass import reviewed_judgments


def test_labels_read_since_the_last_run_give_the_same_list_as_reading_them_all(harness, rate):
    h = harness(n_items=20)
    load_items(h.ctx)
    stage = h.ctx.campaign.stages[0]
    plan_stage(h.ctx, stage)
    post_pending(h.ctx)
    hits = sorted(h.hits(), key=lambda x: x.id)
    seen = []
    # workers in an order that interleaves assignment ids, so new labels sort among the old ones
    for n, worker in enumerate(("AZULU0000001", "AALPHA000001", "AMIKE0000001")):
        for hit in hits[n:]:
            h.work(worker, hit.hit_id, rate(1 + n))
        collect(h.ctx, sweep=len(hits))
        incremental = reviewed_judgments(h.ctx, stage)
        full = reviewed_judgments(dataclasses.replace(h.ctx, cache={}), stage)  # a fresh daemon reads them all
        assert incremental == full
        seen.append(len(full))
    assert seen[0] < seen[1] < seen[2]  # each round brought new labels
    assert h.ctx.cache[f"reviewed:{stage.name}"]["after"] > 0
