"""Collecting answers: every submitted assignment, paginated, stored once.

An assignment and its judgments are written in one transaction keyed by the assignment id, so a crash
mid-collect loses nothing the marketplace still holds (it is listed again next tick) and counts nothing
twice (the second insert is skipped). Approvals that happened on the marketplace without us (auto-
approval after the delay) are booked here, with the same once-only ledger refs as our own approvals.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from decimal import Decimal

from sqlmodel import Session, col, func, select

from campaign.ledger import charge_assignment, release_assignment
from campaign.marketplaces.base import MarketError, RemoteAssignment, fees_of
from campaign.steps.context import Context, crash_point, remote_id
from campaign.store import AssignmentRow, HitRow, ItemRow, JudgmentRow, WorkerRow
from campaign.tasks import get as get_kind
from campaign.tasks.base import InvalidAnswer, ShownItem

log = logging.getLogger(__name__)


SWEEP = 20  # open HITs looked at per pass besides the reviewable ones (partly done HITs; each is a request)
CURSOR_KEY = "collect_cursor"


def collect(ctx: Context, sweep: int = SWEEP) -> int:
    """Fetch new assignments; returns how many new ones were stored.

    A pass looks at what became reviewable (every slot submitted, or expired with nothing pending:
    ListReviewableHITs) and at the next `sweep` open HITs after a cursor kept in the store, so work in
    partly done HITs is collected within a few passes while a pass costs the same at 800 open HITs as
    at 9,400. A full HIT, once collected, is marked Reviewing where the marketplace allows, which takes
    it off the reviewable list: the list stays as short as the work that is new.
    """
    with ctx.store.session() as s:
        hits = s.exec(select(HitRow).where(HitRow.campaign == ctx.name, HitRow.status == "posted").order_by(col(HitRow.id))).all()
    if not hits:
        return 0
    cursor = int(ctx.store.get_kv(ctx.name, CURSOR_KEY, "0") or 0)
    by_remote = {remote_id(h): h for h in hits}
    try:
        reviewable = [by_remote[h] for h in ctx.market.reviewable_hits() if h in by_remote]
    except MarketError as exc:
        ctx.store.event(ctx.name, "marketplace_error", f"listing reviewable HITs: {exc}", level="warning")
        reviewable = []
    ready = {h.id for h in reviewable}
    with ctx.store.session() as s:  # HITs with every slot stored have nothing more to give
        stored = dict(s.exec(select(AssignmentRow.hit_key, func.count()).where(
            AssignmentRow.campaign == ctx.name).group_by(AssignmentRow.hit_key)).all())
    open_ = [h for h in hits if h.id not in ready and stored.get(h.hit_key, 0) < h.assignments]
    after = [h for h in open_ if (h.id or 0) > cursor]
    before = [h for h in open_ if (h.id or 0) <= cursor]
    swept = (after + before)[:sweep]
    new = 0
    for hit in reviewable + swept:
        try:
            remote = ctx.market.submissions(remote_id(hit))
        except MarketError as exc:
            ctx.store.event(ctx.name, "marketplace_error", f"collecting {hit.hit_key}: {exc}", level="warning", subject=hit.hit_key)
            break
        new += store_assignments(ctx, hit, remote)
        if hit.id in ready and len(remote) >= hit.assignments:
            _done_collecting(ctx, remote_id(hit))
    if swept:
        ctx.store.set_kv(ctx.name, CURSOR_KEY, str(swept[-1].id))
    return new


def _done_collecting(ctx: Context, hit_id: str) -> None:
    """Every slot of the HIT is stored: off the reviewable list (MTurk: UpdateHITReviewStatus to
    Reviewing). Only full HITs: an expired HIT that may be extended must stay able to take work."""
    mark = getattr(ctx.market, "mark_reviewing", None)
    if mark is None:
        return
    try:
        mark(hit_id)
    except MarketError as exc:  # harmless: it is listed (and collected, finding nothing new) again
        log.debug("marking %s reviewing: %s", hit_id, exc)


def store_assignments(ctx: Context, hit: HitRow, remote: Sequence[RemoteAssignment]) -> int:
    """Store the listed assignments not stored yet (each with its judgments, in one transaction), and
    adopt decisions the marketplace made without us; returns how many were new."""
    stage = ctx.campaign.stage(hit.stage)
    kind = get_kind(stage.kind)
    items: list[ShownItem] | None = None
    new = 0
    for a in remote:
        aid = a.assignment_id
        status = a.status
        with ctx.store.session() as s:
            row = s.get(AssignmentRow, aid)
            if row is None:
                row = AssignmentRow(
                    assignment_id=aid, campaign=ctx.name, stage=hit.stage, hit_key=hit.hit_key, hit_id=remote_id(hit),
                    worker_id=a.worker_id, status="submitted", answer_xml=a.answer,
                    accept_time=a.accept_time, submit_time=a.submit_time, collected_at=ctx.clock.now(),
                )
                if items is None:
                    texts = dict(s.exec(select(ItemRow.item_key, ItemRow.text).where(
                        ItemRow.campaign == ctx.name, col(ItemRow.item_key).in_(hit.keys()))).all())
                    items = [ShownItem(key=k, text=texts.get(k, "")) for k in hit.keys()]
                try:
                    judgments = kind.parse(stage, ctx.market.answer_fields(row.answer_xml), items)
                except (InvalidAnswer, ValueError) as exc:
                    row.valid, row.error, judgments = False, str(exc)[:500], []
                s.add(row)
                for j in judgments:
                    s.add(JudgmentRow(campaign=ctx.name, stage=hit.stage, assignment_id=aid, worker_id=row.worker_id,
                                      item_key=j.item_key, value=j.value,
                                      extra=json.dumps(dict(j.extra), sort_keys=True) if j.extra else None))
                w = s.exec(select(WorkerRow).where(WorkerRow.campaign == ctx.name, WorkerRow.worker_id == row.worker_id)).first()
                if w is None:
                    w = WorkerRow(campaign=ctx.name, worker_id=row.worker_id, first_seen=ctx.clock.now())
                w.assignments += 1
                s.add(w)
                new += 1
                crash_point("collect.mid_transaction")
            if status != row.status and row.status in ("submitted", "approving", "rejecting"):
                _adopt_remote_status(ctx, s, hit, row, status)
        crash_point("collect.after_assignment")
    return new


def _adopt_remote_status(ctx: Context, s: Session, hit: HitRow, row: AssignmentRow, status: str) -> None:
    """The marketplace decided first (auto-approval, or our own call whose answer we lost in a crash)."""
    reward = Decimal(hit.reward)
    if status == "approved":
        charge_assignment(s, ctx.name, hit.hit_key, row.assignment_id, reward, hit.assignments, fees_of(ctx.market))
    elif status == "rejected":
        release_assignment(s, ctx.name, hit.hit_key, row.assignment_id, reward, hit.assignments, fees_of(ctx.market))
    else:
        return
    if row.status == "submitted":
        ctx.store.event(ctx.name, "auto_approved" if status == "approved" else "rejected_remotely",
                        f"{row.assignment_id} was {status} on the marketplace", subject=row.assignment_id, session=s)
    row.status = status
    row.decided_at = ctx.clock.now()
    s.add(row)
