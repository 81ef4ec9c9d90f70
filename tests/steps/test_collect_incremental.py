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


def test_a_campaigns_hits_have_a_type_of_their_own_and_collect_lists_only_it(harness, rate):
    """Two campaigns on one account never share a HIT type (the campaign's tag is one more keyword), and
    collect lists the reviewable HITs of its campaign's types only: a daemon holding forty campaigns does
    not read every campaign's finished work on every campaign's pass."""
    from campaign.steps.post import hit_type_id, hit_type_tag

    h = harness(n_items=10)
    full, partial = _posted(h)
    tag = hit_type_tag(h.ctx)
    assert tag == f"campaign-{h.ctx.instance}"
    stage = h.ctx.campaign.stages[0]
    with h.ctx.store.session() as s:
        from campaign.store import CampaignRow

        row = s.get(CampaignRow, h.ctx.name)
        assert row is not None
        other = row.spec_json.replace(tag, "campaign-another")
        row.spec_json = other
        s.add(row)
    import dataclasses

    another = dataclasses.replace(h.ctx, cache={})  # another campaign's daemon, same account and settings
    assert hit_type_id(another, stage) != full.hit_type_id == partial.hit_type_id == hit_type_id(h.ctx, stage)
    listed: list[tuple[str, ...]] = []
    plain = h.ctx.market.reviewable_hits

    def recording(type_ids=()):
        listed.append(tuple(type_ids))
        return plain(type_ids)

    h.ctx.market.reviewable_hits = recording  # type: ignore[method-assign]
    for n in range(full.assignments):
        h.work(f"AWORKER{n:07d}", full.hit_id, rate(3))
    assert collect(h.ctx, sweep=0) == full.assignments
    assert listed == [(full.hit_type_id,)]


def test_the_paced_sweep_follows_the_campaign_clock_not_the_passes(harness, rate):
    """By default the sweep goes round the open HITs SWEEP_ROUNDS times per auto-approval delay of the
    campaign clock: a daemon passing twice as often does not sweep twice as much."""
    from campaign.steps.collect import SWEEP, SWEEP_ROUNDS

    h = harness(n_items=60)
    hits = _posted(h)
    assert len(hits) == 12 < SWEEP
    delay = min(st.auto_approval_delay for st in h.ctx.campaign.stages)

    def swept() -> int:
        before = h.ctx.market.requests_by_op.get("list_assignments_for_hit", 0)
        collect(h.ctx)
        return h.ctx.market.requests_by_op.get("list_assignments_for_hit", 0) - before

    assert swept() == 12  # this daemon's first pass: a full sweep
    assert [swept() for _ in range(5)] == [1] * 5  # the clock stood still: one HIT a pass
    h.clock.advance(delay / SWEEP_ROUNDS / 2)  # half a round is owed: 6 of the 12 open HITs
    assert swept() == 6
    h.clock.advance(delay / SWEEP_ROUNDS)  # a whole round owed (at most SWEEP a pass)
    assert swept() == 12
    h.work("APARTIAL000001", hits[3].hit_id, rate(4))  # a partly done HIT is found by the sweep
    got = 0
    for _ in range(len(hits)):
        got += collect(h.ctx)
    assert got == 1
