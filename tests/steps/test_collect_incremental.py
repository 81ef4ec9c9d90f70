"""Collect's cost follows new work: what became reviewable, plus a bounded sweep of open HITs."""

from __future__ import annotations

from campaign.steps.collect import collect
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending


def _posted(h):
    load_items(h.ctx)
    plan_stage(h.ctx, h.ctx.campaign.stages[0])
    post_pending(h.ctx)
    return sorted(h.hits(), key=lambda x: x.id)


def test_full_hits_are_collected_from_the_reviewable_list_and_then_leave_it(harness, rate):
    h = harness(n_items=10)
    full, partial = _posted(h)
    for n in range(full.assignments):
        h.work(f"AWORKER{n:07d}", full.hit_id, rate(3))
    h.work("APARTIAL000001", partial.hit_id, rate(4))
    assert full.hit_id in h.ctx.market.reviewable_hits()
    assert collect(h.ctx, sweep=0) == full.assignments  # the full HIT, found through ListReviewableHITs
    assert full.hit_id not in h.ctx.market.reviewable_hits()  # marked Reviewing once every slot is stored
    before = h.ctx.market.requests
    assert collect(h.ctx, sweep=0) == 0
    assert h.ctx.market.requests - before == 1  # nothing new: one listing, no per-HIT calls
    assert collect(h.ctx, sweep=1) == 1  # the partly done HIT comes in through the sweep
    assert collect(h.ctx, sweep=1) == 0


def test_the_sweep_goes_round_every_open_hit(harness, rate):
    h = harness(n_items=20)
    hits = _posted(h)
    assert len(hits) == 4
    for n, hit in enumerate(hits):
        h.work(f"AWORKER{n:07d}", hit.hit_id, rate(2))
    got = [collect(h.ctx, sweep=1) for _ in range(len(hits))]
    assert got == [1, 1, 1, 1]  # one HIT per pass, each in turn, none skipped
    assert collect(h.ctx, sweep=4) == 0


def test_a_pass_out_of_time_leaves_the_rest_reviewable_for_the_next(harness, rate):
    h = harness(n_items=20)
    hits = _posted(h)
    for hit in hits[:3]:
        for n in range(hit.assignments):
            h.work(f"AWORKER{n:07d}", hit.hit_id, rate(2))
    per_hit = hits[0].assignments
    assert collect(h.ctx, sweep=0, seconds=0.0) == per_hit  # one HIT per pass when the time is up at once
    assert len(h.ctx.market.reviewable_hits()) == 2  # the others wait on the list, not lost
    assert collect(h.ctx, sweep=0) == 2 * per_hit
    assert h.ctx.market.reviewable_hits() == []
