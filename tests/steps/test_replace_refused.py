"""Refused answers are asked for again: a HIT whose every slot is decided with fewer approved answers
than the stage asks for gets the missing slots back (bounded, once per round, booked before the call)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from sqlmodel import select

from campaign.ledger import totals
from campaign.marketplaces.base import AlreadyDone
from campaign.steps.collect import collect
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending
from campaign.steps.quality_pass import quality_pass
from campaign.steps.replace import plan_extra, replace_refused
from campaign.steps.review import close_finished_hits, review
from campaign.store import AssignmentRow, HitRow, LedgerRow
from campaign.tasks import get as get_kind


@pytest.fixture(autouse=True)
def likert_needs_every_answer(monkeypatch):
    """The harness's campaign is Likert, which does with fewer answers; here it asks for replacements as
    a kind that needs every answer (nuggets) does."""
    monkeypatch.setattr(type(get_kind("likert")), "replace_refused", True)


def test_plan_extra_tops_up_decided_hits_within_bounds():
    assert plan_extra(first=3, slots=3, decided=3, approved=2, open_=0) == 1
    assert plan_extra(first=3, slots=3, decided=2, approved=2, open_=1) == 0  # work still open
    assert plan_extra(first=3, slots=3, decided=3, approved=3, open_=0) == 0  # nothing missing
    assert plan_extra(first=3, slots=4, decided=4, approved=2, open_=0) == 0  # allowance (1 of 3) used up
    assert plan_extra(first=7, slots=7, decided=7, approved=4, open_=0) == 2  # below MTurk's 10-assignment tier
    assert plan_extra(first=7, slots=9, decided=9, approved=6, open_=0) == 0


def _bad(form):
    return [("x", "1")]


def _one_refused_answer(harness, rate):
    """The stage posted and its work decided: every HIT answered in full but one, which has two good
    answers and one refused (reviewed, not yet replaced); (the harness, that HIT's row)."""
    h = harness()
    load_items(h.ctx)
    plan_stage(h.ctx, h.ctx.campaign.stages[0])
    post_pending(h.ctx)
    hit, *others = h.hits()
    for other in others:  # the stage's other HITs answered in full, so the stage's work is decided
        for w in range(3):
            h.work(f"AOTHER{w:08d}", other.hit_id, rate(2 + w))
    for w in range(2):
        h.work(f"AGOOD{w:09d}", hit.hit_id, rate(3 + w))
    h.work("ABAD0000000001", hit.hit_id, _bad)
    collect(h.ctx)
    quality_pass(h.ctx)
    review(h.ctx)
    return h, hit


def test_rejected_answer_is_replaced_once_and_paid_once(harness, rate):
    h, hit = _one_refused_answer(harness, rate)
    assert replace_refused(h.ctx) == 1
    assert replace_refused(h.ctx) == 0  # not asked twice
    close_finished_hits(h.ctx)
    row = next(r for r in h.hits() if r.hit_key == hit.hit_key)
    assert row.status == "posted" and row.assignments == 4
    with h.ctx.store.session() as s:
        refs = [r.ref for r in s.exec(select(LedgerRow).where(LedgerRow.hit_key == hit.hit_key)).all()]
    assert f"reserve:{hit.hit_key}:extra-1" in refs
    with pytest.raises(AlreadyDone):  # the round's token: a retry after a crash adds nothing
        h.ctx.market.add_assignments(hit.hit_id, 1, f"{row.token}-extra-1")
    h.work("AGOOD000000009", hit.hit_id, rate(4))  # the new slot is taken by another worker
    collect(h.ctx)
    quality_pass(h.ctx)
    review(h.ctx)
    assert replace_refused(h.ctx) == 0
    close_finished_hits(h.ctx)
    row = next(r for r in h.hits() if r.hit_key == hit.hit_key)
    assert row.status == "closed"
    with h.ctx.store.session() as s:
        approved = s.exec(select(AssignmentRow).where(AssignmentRow.hit_key == hit.hit_key, AssignmentRow.status == "approved")).all()
        assert len(approved) == 3
        charges = s.exec(select(LedgerRow).where(LedgerRow.hit_key == hit.hit_key, LedgerRow.kind == "charge")).all()
        assert len(charges) == 3  # each approved answer paid once
        t = totals(s, h.ctx.name, h.ctx.campaign.budget)
    assert t.reserved >= Decimal(0)


def test_interrupted_round_is_repeated_with_the_same_token(harness, rate):
    h, hit = _one_refused_answer(harness, rate)
    h.ctx.market.add_assignments(hit.hit_id, 1, f"{hit.token}-extra-1")  # the call went through, then a crash:
    with h.ctx.store.session() as s:  # the intent was written, its record was not
        row = s.exec(select(HitRow).where(HitRow.hit_key == hit.hit_key)).one()
        row.assignments += 1
        s.add(row)
        h.ctx.store.set_kv(h.ctx.name, f"replace:{hit.hit_key}", json.dumps({"round": 1, "state": "asking", "count": 1}), session=s)
    assert replace_refused(h.ctx) == 1  # AlreadyDone: recorded, not added again
    h.work("AGOOD000000009", hit.hit_id, rate(4))
    from campaign.market.worker_client import WorkerAPIError
    with pytest.raises(WorkerAPIError):
        h.work("AGOOD000000010", hit.hit_id, rate(4))  # exactly one slot was added


def test_answer_left_out_by_quality_control_is_replaced(harness, rate, monkeypatch):
    """Paid but excluded (random work caught by agreement alone) does not count as one of the HIT's answers."""
    h = harness()
    hits = h.answer_all_reviewed()
    assert replace_refused(h.ctx) == 0  # every answer approved and counted
    h.leave_out_first_answer(hits[0].hit_key)
    assert replace_refused(h.ctx) == 0  # a Likert mean does with fewer answers
    monkeypatch.setattr(type(get_kind("likert")), "replace_excluded", True)
    assert replace_refused(h.ctx) == 1  # a kind that needs every answer asks again
