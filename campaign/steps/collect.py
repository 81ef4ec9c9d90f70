"""Collecting answers: every submitted assignment, paginated, stored once.

An assignment and its judgments are written in one transaction keyed by the assignment id, so a crash
mid-collect loses nothing the marketplace still holds (it is listed again next tick) and counts nothing
twice (the second insert is skipped). Approvals that happened on the marketplace without us (auto-
approval after the delay) are booked here, with the same once-only ledger refs as our own approvals.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from sqlalchemy import insert, literal_column
from sqlmodel import Session, col, func, select

from campaign.clock import work_deadline
from campaign.crash import crash_point
from campaign.ledger import charge_assignment, release_assignment
from campaign.marketplaces.base import MarketError, RemoteAssignment, ReviewMarking, fees_of
from campaign.state import AssignmentStatus, HeldKind, HitStatus, Keys, SubmissionStatus
from campaign.steps.context import BEHIND_COLLECT, Context, remote_id
from campaign.steps.isolation import describe, hold, note_once, settle_remotely
from campaign.store import AssignmentRow, HitRow, ItemRow, JudgmentRow, WorkerRow
from campaign.tasks import get as get_kind
from campaign.tasks.base import InvalidAnswer, ShownItem

log = logging.getLogger(__name__)


SWEEP = 20  # open HITs looked at per pass at most besides the reviewable ones (partly done HITs; each is a request)
SWEEP_ROUNDS = 4  # the paced sweep goes round every open HIT this often per auto-approval delay (campaign clock)
SWEEP_DUE = "collect:sweep_due"  # Context.cache: (campaign clock at the last paced sweep, open HITs owed to it)
COLLECT_SECONDS = 2.0  # wall seconds one pass may spend fetching (what is left is listed again next pass)
_PAGE = 200  # HITs read from the store at a time while looking for the sweep's next open HITs
_IN = 500  # ids per IN (...) list


def collect(ctx: Context, sweep: int | None = None, seconds: float = COLLECT_SECONDS) -> int:
    """Fetch new assignments; returns how many new ones were stored.

    A pass looks at what became reviewable (every slot submitted, or expired with nothing pending:
    ListReviewableHITs, of this campaign's HIT types only: `_open_types`) and at the next `sweep` open HITs after a cursor kept in the store, so work in
    partly done HITs is collected within a few passes while a pass costs the same at 800 open HITs as
    at 9,400. A full HIT, once collected, is marked Reviewing where the marketplace allows, which takes
    it off the reviewable list: the list stays as short as the work that is new. Only the HITs named
    by the list and those the sweep reaches are read from the store, and fetching stops after
    `seconds` (the rest stays reviewable for the next pass), so a pass follows the new work, not the
    campaign's size.

    `sweep`: how many open HITs to sweep; by default (None) paced by the campaign's clock
    (`_paced_sweep`), so the sweep's requests follow the clock, not how often this daemon passes.
    """
    with ctx.store.session() as s:
        any_open = s.exec(select(HitRow.id).where(HitRow.campaign == ctx.name, HitRow.status == HitStatus.POSTED).limit(1)).first()
        types = _open_types(s, ctx.name) if any_open is not None else ()
    if any_open is None:
        return 0
    deadline = work_deadline(ctx.clock, seconds)
    try:
        listed = ctx.market.reviewable_hits(types)
    except MarketError as exc:
        ctx.store.event(ctx.name, "marketplace_error", f"listing reviewable HITs: {exc}", level="warning")
        listed = []
    reviewable = _posted_by_remote_id(ctx, listed)
    ready = {h.id for h in reviewable}
    if sweep is None:
        sweep = _paced_sweep(ctx)
    swept = _sweep(ctx, sweep, ready) if sweep > 0 else []
    new = 0
    last_swept: int | None = None
    ctx.cache[BEHIND_COLLECT] = False
    for n, hit in enumerate(reviewable + swept):
        if n and time.monotonic() > deadline:
            ctx.cache[BEHIND_COLLECT] = n < len(reviewable)  # finished work left on the list: posting waits
            break
        try:
            remote = ctx.market.submissions(remote_id(hit))
        except MarketError as exc:
            ctx.store.event(ctx.name, "marketplace_error", f"collecting {hit.hit_key}: {exc}", level="warning", subject=hit.hit_key)
            break
        try:
            new += store_assignments(ctx, hit, remote)
        except Exception as exc:  # this HIT's listing cannot be stored: the others still are (noted once per error)
            note_once(ctx, "collect", hit.hit_key, exc)
            continue
        if hit.id in ready and len(remote) >= hit.assignments:
            _done_collecting(ctx, remote_id(hit))
        if hit.id not in ready:
            last_swept = hit.id
    if last_swept is not None:  # the sweep goes on after the last HIT it looked at
        ctx.store.set_kv(ctx.name, Keys.COLLECT_CURSOR, str(last_swept))
    return new


def _paced_sweep(ctx: Context) -> int:
    """How many open HITs this pass sweeps: enough to go round every open HIT `SWEEP_ROUNDS` times per
    auto-approval delay of the campaign clock (the shortest of its stages'), at least 1 and at most
    `SWEEP` a pass; a daemon's first pass of a campaign sweeps `SWEEP`. At 20 HITs every pass, a daemon
    passing twice as often swept twice as much: two daemons on the four 47,000 campaigns made 7,800 more
    requests than one, nearly all of them listings of HITs nobody had started. A partly done HIT is
    found within a quarter of the delay (and, once full or expired, through the reviewable list at once)."""
    now = ctx.clock.now()
    delays = [st.auto_approval_delay for st in ctx.campaign.stages if st.auto_approval_delay]
    last = ctx.cache.get(SWEEP_DUE)
    if not delays or not isinstance(last, tuple):
        ctx.cache[SWEEP_DUE] = (now, 0.0)
        return SWEEP
    with ctx.store.session() as s:
        open_hits = int(s.exec(select(func.count()).select_from(HitRow).where(
            HitRow.campaign == ctx.name, HitRow.status == HitStatus.POSTED)).one())
    at, owed = last
    owed = min(float(SWEEP), owed + open_hits * max(0.0, now - at) * SWEEP_ROUNDS / min(delays))
    n = max(1, min(SWEEP, int(owed)))
    ctx.cache[SWEEP_DUE] = (now, max(0.0, owed - n))
    return n


def _open_types(s: Session, campaign: str) -> tuple[str, ...]:
    """The HIT types of the campaign's open HITs, for a listing of their reviewable HITs only; () (the
    account's whole list) if one of them has no type recorded. A campaign's HITs have a type of their
    own (`post.hit_type_id`), so a daemon holding many campaigns of one account lists each campaign's
    new work once, not every campaign's on every campaign's pass."""
    types = s.exec(select(HitRow.hit_type_id).where(HitRow.campaign == campaign, HitRow.status == HitStatus.POSTED)
                   .distinct()).all()
    if any(t is None for t in types):
        return ()
    return tuple(sorted(t for t in types if t is not None))


def _posted_by_remote_id(ctx: Context, hit_ids: Sequence[str]) -> list[HitRow]:
    """This campaign's open HITs among the marketplace's ids, in the marketplace's order."""
    found: dict[str, HitRow] = {}
    with ctx.store.session() as s:
        for i in range(0, len(hit_ids), _IN):
            for h in s.exec(select(HitRow).where(HitRow.campaign == ctx.name, HitRow.status == HitStatus.POSTED,
                                                 col(HitRow.hit_id).in_(hit_ids[i:i + _IN]))).all():
                found[remote_id(h)] = h
    return [found[h] for h in hit_ids if h in found]


def _sweep(ctx: Context, sweep: int, ready: set[int | None]) -> list[HitRow]:
    """The next `sweep` open HITs after the cursor (round the end to the start) that are not on the
    reviewable list and still miss assignments in the store, read from the store a page at a time."""
    cursor = int(ctx.store.get_kv(ctx.name, Keys.COLLECT_CURSOR, "0") or 0)
    chosen: list[int] = []
    seen: set[int | None] = set()
    with ctx.store.session() as s:
        # the pages are read as (id, key, slots) only: the open HITs passed over (full in the store,
        # waiting for their decisions) can be most of a page, and loading each as a whole row (its
        # items, annotation, token) was 8% of a daemon's CPU at 470,000 propositions
        for low, high in ((cursor, None), (-1, cursor)):
            after = low
            while len(chosen) < sweep:
                page = s.exec(open_hits_after(ctx.name, after, high, _PAGE)).all()
                if not page:
                    break
                after = page[-1][0] or 0
                keys = [key for _, key, _ in page]
                stored = dict(s.exec(select(AssignmentRow.hit_key, func.count()).where(
                    AssignmentRow.campaign == ctx.name, col(AssignmentRow.hit_key).in_(keys)).group_by(AssignmentRow.hit_key)).all())
                for hit_id, key, slots in page:
                    if hit_id in ready or hit_id in seen or stored.get(key, 0) >= slots:
                        continue
                    seen.add(hit_id)
                    chosen.append(int(hit_id or 0))
                    if len(chosen) == sweep:
                        break
        if not chosen:
            return []
        by_id = {h.id: h for h in s.exec(select(HitRow).where(col(HitRow.id).in_(chosen))).all()}
    return [by_id[i] for i in chosen if i in by_id]


def open_hits_after(campaign: str, after: int, upto: int | None, limit: int) -> Any:
    """(id, key, slots) of the campaign's open HITs with ids above `after` (and at most `upto`), in id
    order: a page of the sweep."""
    q = select(HitRow.id, HitRow.hit_key, HitRow.assignments).where(
        HitRow.campaign == campaign, HitRow.status == HitStatus.POSTED, col(HitRow.id) > after)
    if upto is not None:
        q = q.where(col(HitRow.id) <= upto)
    # The campaign's open HITs after the cursor are chosen first (along `ix_hits_campaign_status_id`,
    # migration 0007) and only then ordered and cut: `OFFSET 0` keeps the planner from pushing the order
    # and the limit inside. Asked for the first rows in id order, PostgreSQL's generic plan walked the
    # primary key through every campaign's HITs, guessing that matches spread evenly along it (at 470,000
    # propositions 14.5 ms a page, the store's costliest statement: 152 s of a 67-minute run)
    inner = q.offset(literal_column("0")).subquery()  # a literal: an OFFSET parameter leaves the limit's guess in
    return select(inner.c.id, inner.c.hit_key, inner.c.assignments).order_by(inner.c.id).limit(limit)


def _done_collecting(ctx: Context, hit_id: str) -> None:
    """Every slot of the HIT is stored: off the reviewable list (MTurk: UpdateHITReviewStatus to
    Reviewing). Only full HITs: an expired HIT that may be extended must stay able to take work."""
    if not isinstance(ctx.market, ReviewMarking):
        return
    try:
        ctx.market.mark_reviewing(hit_id)
    except MarketError as exc:  # harmless: it is listed (and collected, finding nothing new) again
        log.debug("marking %s reviewing: %s", hit_id, exc)


def store_assignments(ctx: Context, hit: HitRow, remote: Sequence[RemoteAssignment]) -> int:
    """Store the listed assignments not stored yet (with their judgments), and adopt decisions the
    marketplace made without us; returns how many were new.

    One transaction per HIT, with the HIT's stored assignments, its items and its workers read once:
    a HIT's listing is all-or-nothing in the store (a crash loses nothing the marketplace still lists,
    and counts nothing twice), and the per-assignment transactions and lookups were the largest part
    of a pass's cost at tens of thousands of assignments.
    """
    if not remote:
        return 0
    stage = ctx.campaign.stage(hit.stage)
    kind = get_kind(stage.kind)
    items: list[ShownItem] | None = None
    new = 0
    with ctx.store.session() as s:
        ids = [a.assignment_id for a in remote]
        rows = {r.assignment_id: r for r in s.exec(select(AssignmentRow).where(col(AssignmentRow.assignment_id).in_(ids))).all()}
        workers: dict[str, WorkerRow] | None = None
        labels: list[dict[str, object]] = []
        for a in remote:
            aid = a.assignment_id
            status = a.status
            row = rows.get(aid)
            if row is None:
                row = AssignmentRow(
                    assignment_id=aid, campaign=ctx.name, stage=hit.stage, hit_key=hit.hit_key, hit_id=remote_id(hit),
                    worker_id=a.worker_id, status=AssignmentStatus.SUBMITTED, answer_xml=a.answer,
                    accept_time=a.accept_time, submit_time=a.submit_time, collected_at=ctx.clock.now(),
                )
                rows[aid] = row
                if items is None:
                    texts = dict(s.exec(select(ItemRow.item_key, ItemRow.text).where(
                        ItemRow.campaign == ctx.name, col(ItemRow.item_key).in_(hit.keys()))).all())
                    items = [ShownItem(key=k, text=texts.get(k, "")) for k in hit.keys()]
                if workers is None:
                    wids = {x.worker_id for x in remote}
                    workers = {w.worker_id: w for w in s.exec(select(WorkerRow).where(
                        WorkerRow.campaign == ctx.name, col(WorkerRow.worker_id).in_(wids))).all()}
                try:
                    judgments = kind.parse(stage, ctx.market.answer_fields(row.answer_xml), items)
                except (InvalidAnswer, ValueError, SyntaxError) as exc:
                    # what reading an answer may raise: a kind's InvalidAnswer, a marketplace's unreadable
                    # answer (a ValueError: campaign.answer_xml.MalformedAnswer), and the XML parser's
                    # own ParseError (a SyntaxError) from any reader that lets it through
                    row.valid, row.error, judgments = False, str(exc)[:500], []
                except Exception as exc:  # a failure of ours, not the worker's: held for the operator (invariant 8)
                    row.status, row.valid, row.error, judgments = AssignmentStatus.HELD, False, describe(exc), []
                    s.add(row)
                    hold(ctx, HeldKind.ASSIGNMENT, aid, "collect", exc, hit_key=hit.hit_key, worker_id=row.worker_id, session=s)
                s.add(row)
                labels += [{"campaign": ctx.name, "stage": hit.stage, "assignment_id": aid, "worker_id": row.worker_id,
                            "item_key": j.item_key, "value": j.value, "excluded": False,
                            "extra": json.dumps(dict(j.extra), sort_keys=True) if j.extra else None} for j in judgments]
                w = workers.get(row.worker_id)
                if w is None:
                    w = workers[row.worker_id] = WorkerRow(campaign=ctx.name, worker_id=row.worker_id, first_seen=ctx.clock.now())
                w.assignments += 1
                s.add(w)
                new += 1
                crash_point("collect.mid_transaction")
            if status != row.status and row.status in (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVING, AssignmentStatus.REJECTING, AssignmentStatus.HELD):
                _adopt_remote_status(ctx, s, hit, row, status)
        if labels:  # plain rows in one statement: through the ORM, the labels were most of a HIT's write
            s.flush()
            s.connection().execute(insert(JudgmentRow.__table__), labels)  # type: ignore[attr-defined]
    crash_point("collect.after_assignment")
    return new


def _adopt_remote_status(ctx: Context, s: Session, hit: HitRow, row: AssignmentRow, status: str) -> None:
    """The marketplace decided first (auto-approval, or our own call whose answer we lost in a crash)."""
    reward = Decimal(hit.reward)
    if status == SubmissionStatus.APPROVED:
        charge_assignment(s, ctx.name, hit.hit_key, row.assignment_id, reward, hit.assignments, fees_of(ctx.market))
    elif status == SubmissionStatus.REJECTED:
        release_assignment(s, ctx.name, hit.hit_key, row.assignment_id, reward, hit.assignments, fees_of(ctx.market))
    else:
        return
    if row.status in (AssignmentStatus.SUBMITTED, AssignmentStatus.HELD):
        ctx.store.event(ctx.name, "auto_approved" if status == SubmissionStatus.APPROVED else "rejected_remotely",
                        f"{row.assignment_id} was {status} on the marketplace", subject=row.assignment_id, session=s)
    if row.status == AssignmentStatus.HELD:  # the marketplace settled it before the operator did: its decision stands
        settle_remotely(ctx, s, HeldKind.ASSIGNMENT, row.assignment_id, f"{status} on the marketplace before anyone decided")
    row.status = status
    row.decided_at = ctx.clock.now()
    s.add(row)
