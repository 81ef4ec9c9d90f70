from __future__ import annotations

from decimal import Decimal

from sqlmodel import select

from campaign.ledger import totals
from campaign.marketplaces.base import HitRequest
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import hit_type_id, page, post_pending
from campaign.store import EventRow, HitRow


def test_post_puts_every_draft_up_once_and_reserves_its_cost(harness):
    h = harness()
    load_items(h.ctx)
    stage = h.ctx.campaign.stages[0]
    assert plan_stage(h.ctx, stage) == 2
    assert post_pending(h.ctx) == 2
    hits = h.hits()
    assert {x.status for x in hits} == {"posted"} and all(x.hit_id for x in hits)
    for x in hits:
        remote = h.ctx.market.get_hit(x.hit_id)
        assert remote.annotation == x.annotation and not remote.closed
    with h.ctx.store.session() as s:
        t = totals(s, h.ctx.name, h.ctx.campaign.budget)
    assert t.reserved == 2 * 3 * (Decimal("0.06") + Decimal("0.01"))  # reward + MTurk's $0.01 minimum fee, 3 slots each
    assert post_pending(h.ctx) == 0  # nothing left to post


def test_a_post_interrupted_after_the_call_is_reconciled_not_duplicated(harness):
    h = harness()
    load_items(h.ctx)
    stage = h.ctx.campaign.stages[0]
    plan_stage(h.ctx, stage)
    # the daemon wrote its intent and made the call, then died before recording the HIT id
    with h.ctx.store.session() as s:
        row = s.exec(select(HitRow).where(HitRow.hit_key == "likert-00000")).one()
        row.status, row.posting_started_at = "posting", h.clock.now()
        s.add(row)
        s.commit()
        s.refresh(row)
        first = h.ctx.market.create_hit(hit_type_id(h.ctx, stage), HitRequest(
            html=page(h.ctx, stage, row), max_assignments=row.assignments, lifetime=stage.lifetime,
            annotation=row.annotation, token=row.token))
    assert post_pending(h.ctx) == 2
    row = next(x for x in h.hits() if x.hit_key == "likert-00000")
    assert row.hit_id == first.hit_id
    with h.ctx.store.session() as s:
        events = [e.kind for e in s.exec(select(EventRow).where(EventRow.campaign == h.ctx.name)).all()]
    assert "reconciled" in events
    h.workers.register("AWORKER00000001")
    listed = h.workers.available("AWORKER00000001")
    assert len({x["HITId"] for x in listed}) == 2  # two HITs on the marketplace, not three


def test_a_paused_campaign_posts_nothing(harness):
    from campaign.store import CampaignRow

    h = harness()
    load_items(h.ctx)
    plan_stage(h.ctx, h.ctx.campaign.stages[0])
    with h.ctx.store.session() as s:
        camp = s.get(CampaignRow, h.ctx.name)
        camp.status = "paused"
        s.add(camp)
    assert post_pending(h.ctx) == 0
    assert {x.status for x in h.hits()} == {"draft"}


def test_nothing_new_goes_up_while_the_daemon_is_behind(harness):
    from campaign.steps.context import BEHIND_COLLECT, BEHIND_REVIEW

    h = harness()
    load_items(h.ctx)
    plan_stage(h.ctx, h.ctx.campaign.stages[0])
    for flag in (BEHIND_COLLECT, BEHIND_REVIEW):
        h.ctx.cache[flag] = True  # the last pass left finished work uncollected / undecided
        assert post_pending(h.ctx) == 0
        assert {x.status for x in h.hits()} == {"draft"}
        h.ctx.cache[flag] = False
    assert post_pending(h.ctx) == 2  # caught up: posting goes on


def test_the_hit_type_is_asked_for_once_not_on_every_posting_pass(harness):
    """CreateHITType answers the same id for the same settings, so the daemon asks once per process; it
    asked on every posting pass (1,164 + 1,178 calls of two daemons at 470,000 propositions)."""
    h = harness()
    load_items(h.ctx)
    stage = h.ctx.campaign.stages[0]
    plan_stage(h.ctx, stage)
    market = h.ctx.market
    first = hit_type_id(h.ctx, stage)
    post_pending(h.ctx)
    for _ in range(3):
        assert hit_type_id(h.ctx, stage) == first
        post_pending(h.ctx)
    assert market.requests_by_op.get("create_hit_type") == 1
    group = market.worker_group("test-post-group")
    assert hit_type_id(h.ctx, stage, (group,)) != first  # other settings: another type, asked for
    assert market.requests_by_op.get("create_hit_type") == 2
