"""Quality control reads only the labels stored since its last run and sees exactly what a full
read sees."""

from __future__ import annotations

import dataclasses

from campaign.steps.collect import collect
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending
from campaign.steps.quality_pass import evaluate, new_judgments, running_evidence


def test_evidence_kept_from_pass_to_pass_equals_a_fresh_daemon_reading_every_label(harness, rate):
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
        kept = running_evidence(h.ctx, stage)
        fresh_ctx = dataclasses.replace(h.ctx, cache={})  # a fresh (or restarted) daemon reads them all
        fresh = running_evidence(fresh_ctx, stage)
        assert kept is not None and fresh is not None
        assert kept.evidence(2) == fresh.evidence(2)
        assert evaluate(h.ctx, stage) == evaluate(fresh_ctx, stage)
        rows, _ = new_judgments(fresh_ctx, stage, 0)
        seen.append(len(rows))
        assert sum(kept.labels.values()) + sum(kept.traps_seen.values()) == len(rows)  # every label counted once
    assert seen[0] < seen[1] < seen[2]  # each round brought new labels
    assert h.ctx.cache[f"evidence:{stage.name}"]["after"] > 0
