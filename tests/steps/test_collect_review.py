from __future__ import annotations

import json
from decimal import Decimal

from sqlmodel import select

from campaign.ledger import totals
from campaign.steps.collect import collect
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending
from campaign.steps.quality_pass import quality_pass, stage_review
from campaign.steps.review import close_finished_hits, review
from campaign.store import AssignmentRow, JudgmentRow


def _posted(h):
    load_items(h.ctx)
    plan_stage(h.ctx, h.ctx.campaign.stages[0])
    post_pending(h.ctx)
    return h.hits()


def _assignments(h):
    with h.ctx.store.session() as s:
        return {a.assignment_id: a for a in s.exec(select(AssignmentRow).where(AssignmentRow.campaign == h.ctx.name)).all()}


def test_collect_stores_each_answer_once_with_its_judgments(harness, rate):
    h = harness()
    hit = _posted(h)[0]
    good = h.work("AGOOD000000001", hit.hit_id, rate(4))
    bad = h.work("ABAD0000000001", hit.hit_id, lambda form: [("rating-0", "9")])
    assert collect(h.ctx) == 2
    assert collect(h.ctx) == 0  # listed again: skipped, never counted twice
    rows = _assignments(h)
    assert rows[good].valid and rows[good].status == "submitted"
    assert not rows[bad].valid and "rating-0" in rows[bad].error
    with h.ctx.store.session() as s:
        js = s.exec(select(JudgmentRow).where(JudgmentRow.assignment_id == good)).all()
        assert sorted(j.item_key for j in js) == sorted(hit.keys()) and {j.value for j in js} == {4.0}
        assert not s.exec(select(JudgmentRow).where(JudgmentRow.assignment_id == bad)).all()


def test_review_approves_fitting_work_rejects_the_rest_and_books_money_once(harness, rate):
    h = harness()
    hits = _posted(h)
    for i, hit in enumerate(hits):
        for w in range(3):
            h.work(f"AWORKER{w:07d}", hit.hit_id, rate(2 + w) if not (i == 0 and w == 2) else (lambda form: [("x", "1")]))
    collect(h.ctx)
    quality_pass(h.ctx)
    assert stage_review(h.ctx, h.ctx.campaign.stages[0]) is not None  # the review the next steps read
    assert review(h.ctx) == 6  # every stage slot answered: nobody is held
    rows = _assignments(h)
    assert sorted(a.status for a in rows.values()) == ["approved"] * 5 + ["rejected"]
    rejected = next(a for a in rows.values() if a.status == "rejected")
    assert "did not fit the task" in rejected.feedback
    assert h.ctx.market.get_assignment(rejected.assignment_id).status == "rejected"
    with h.ctx.store.session() as s:
        t = totals(s, h.ctx.name, h.ctx.campaign.budget)
    assert t.spent == 5 * Decimal("0.07") and t.reserved == 0  # the rejected slot's reservation is released
    # a crash after the approval call, before its record: the retry finds it approved and books it once
    aid = next(a.assignment_id for a in rows.values() if a.status == "approved")
    with h.ctx.store.session() as s:
        row = s.get(AssignmentRow, aid)
        row.status = "approving"
        s.add(row)
    assert review(h.ctx) == 1
    with h.ctx.store.session() as s:
        assert totals(s, h.ctx.name, h.ctx.campaign.budget).spent == 5 * Decimal("0.07")
    assert close_finished_hits(h.ctx) == 2  # every slot of both HITs decided
    assert {x.status for x in h.hits()} == {"closed"}


def test_quality_pass_stores_its_review_and_runs_again_only_on_new_answers(harness, rate):
    h = harness()
    hit = _posted(h)[0]
    h.work("AWORKER0000001", hit.hit_id, rate(3))
    collect(h.ctx)
    assert quality_pass(h.ctx) == 1
    assert quality_pass(h.ctx) == 0  # nothing new
    saved = json.loads(h.ctx.store.get_kv(h.ctx.name, "review:likert"))
    assert saved["n"] == 1 and "AWORKER0000001" in saved["evidence"]
    h.work("AWORKER0000002", hit.hit_id, rate(5))
    collect(h.ctx)
    assert quality_pass(h.ctx) == 1
