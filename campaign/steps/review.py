"""Reviewing: approve or reject each submitted assignment, exactly once, with the money booked once.

The decision is written first (`approving` / `rejecting`), then the marketplace is called, then the
outcome and the ledger entry are written together. After a crash, a row still `approving` is retried;
the marketplace answers a repeated approval with `InvalidState`, so the assignment is read back and
its real status adopted. The charge's ledger ref is the assignment id, so however the
approval is learned (our call, the retry, auto-approval seen by collect) it is booked once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from decimal import Decimal
from typing import NamedTuple

from sqlalchemy import and_, or_
from sqlalchemy import select as sa_select
from sqlmodel import col, func, select

from campaign.clock import work_deadline
from campaign.crash import crash_point
from campaign.ledger import book_many, charge_row, release_hit_rest, release_row
from campaign.marketplaces.base import InvalidState, MarketError, TransientError, fees_of
from campaign.quality.review import ReviewResult, feedback
from campaign.state import AssignmentStatus, CampaignStatus, HitStatus, SubmissionStatus
from campaign.steps.collect import store_assignments
from campaign.steps.context import BEHIND_REVIEW, Context, get_row, remote_id
from campaign.steps.isolation import hold_assignment
from campaign.steps.quality_pass import stage_collected, stage_reviews
from campaign.store import AssignmentRow, CampaignRow, HitRow

log = logging.getLogger(__name__)

# Wall seconds one pass may spend on decisions. What is left goes first next pass (oldest first) and,
# while review is behind, nothing new is posted (`post`), so work is still decided before its
# AutoApprovalTime; a bounded share keeps a pass a few seconds long however much work waits (10 s
# before: at 47,000 assignments a saturated daemon's passes took 9-11 s, so a pause or stop waited that long).
REVIEW_SECONDS = 2.0
DECIDED = (AssignmentStatus.APPROVED, AssignmentStatus.REJECTED)
CHUNK = 25  # decisions written (and their outcomes recorded) per transaction

INVALID_FEEDBACK = (
    "Your answer could not be used because it did not fit the task ({why}). "
    "If you think this is a mistake, please contact the requester."
)


class Pending(NamedTuple):
    """What deciding an undecided assignment reads of it. Work held back (its worker's evidence not in
    yet, a rejection waiting for the stage's final evidence) is read again on every pass, hundreds of
    rows a campaign at a time: as whole rows (the answer's XML among them) that was 13% of a daemon's
    CPU at 470,000 propositions."""

    assignment_id: str
    status: str
    stage: str
    worker_id: str
    valid: bool
    error: str | None
    submit_time: float | None


PENDING_COLUMNS = (col(AssignmentRow.assignment_id), col(AssignmentRow.status), col(AssignmentRow.stage),
                   col(AssignmentRow.worker_id), col(AssignmentRow.valid), col(AssignmentRow.error),
                   col(AssignmentRow.submit_time))


def decide(ctx: Context, rows: Sequence[Pending], results: dict[str, ReviewResult]) -> dict[str, tuple[str, str | None]]:
    """approve / reject / hold for each fresh assignment.

    Well-formed work is approved, even when quality control leaves its labels out of the scores: a
    rejection hurts a worker's standing, so it is kept for answers that do not fit the HIT and for work
    the policy marks as clear spam on two kinds of evidence. Work whose worker cannot be judged yet is
    held (not decided) until their evidence is in, the stage is fully collected, or half of the
    auto-approval delay has passed, so spam is not paid for just because it arrived early.

    A rejection waits for the stage's final evidence (fully collected), or, if the work would otherwise
    reach its auto-approval, half the delay: evidence that calls a worker a spammer part-way may clear
    them later, and a rejection cannot be taken back. It also makes the outcome independent of when the
    daemon happened to look: a label counts exactly when its worker is not excluded on the final
    evidence (approved work of a worker excluded at the end is paid but left out), whichever daemon
    decided it and however late (a killed daemon's campaign taken over by another scores the same).

    `results` are the policed stages' latest reviews by stage name; each stage's work is judged by its
    own stage's evidence. A batch is "fully collected" once its HITs are, so holding never stalls the
    next batch for long.
    """
    out: dict[str, tuple[str, str | None]] = {}
    collected: dict[str, bool] = {}
    now = ctx.clock.now()
    for r in rows:
        try:
            decision = _decide_one(ctx, r, results, collected, now)
        except Exception as exc:  # this row only: held for the operator, the others are decided (invariant 8)
            hold_assignment(ctx, r.assignment_id, "review", exc)
            continue
        if decision is not None:
            out[r.assignment_id] = decision
    return out


def _decide_one(ctx: Context, r: Pending, results: dict[str, ReviewResult], collected: dict[str, bool],
                now: float) -> tuple[str, str | None] | None:
    """One assignment's decision (see `decide`); None: held back until the evidence is in."""
    if not r.valid:
        return ("reject", INVALID_FEEDBACK.format(why=r.error or "malformed answer"))
    result = results.get(r.stage)
    if result is None:
        return ("approve", None)
    if r.stage not in collected:
        collected[r.stage] = stage_collected(ctx, r.stage)
    late = r.submit_time is not None and now - r.submit_time > ctx.campaign.stage(r.stage).auto_approval_delay / 2
    if r.worker_id in result.workers("reject"):
        if collected[r.stage] or late:  # on the final evidence, or the last evidence there is time for
            return ("reject", feedback(result.reason(r.worker_id) or "clear spam"))
        return None
    e = result.evidence.get(r.worker_id)
    settled = e is not None and (e.shared_items >= 2 * ctx.campaign.quality.min_shared or e.traps_seen >= 2)
    if settled or collected[r.stage] or late:
        return ("approve", None)
    return None


def review(ctx: Context, limit: int | None = None, seconds: float = REVIEW_SECONDS) -> int:
    """Decide and carry out approvals/rejections for up to `seconds` of wall time (and at most `limit`
    assignments); returns how many were completed.

    Interrupted decisions go first, then fresh work by submit time: the oldest is the closest to its
    auto-approval, so a pass that runs out of time leaves the work with the most time to spare.
    """
    deadline = work_deadline(ctx.clock, seconds)
    with ctx.store.session() as s:
        camp = s.get(CampaignRow, ctx.name)
        if camp is not None and camp.status == CampaignStatus.PAUSED:
            return 0
        rows = [Pending(*r) for r in s.execute(sa_select(*PENDING_COLUMNS).where(
            col(AssignmentRow.campaign) == ctx.name,
            col(AssignmentRow.status).in_((AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVING, AssignmentStatus.REJECTING)))
            .order_by(col(AssignmentRow.collected_at), col(AssignmentRow.assignment_id))).all()]
    rows = sorted(rows, key=lambda r: (r.status == AssignmentStatus.SUBMITTED, r.submit_time or 0.0))[:limit]
    fresh = [r for r in rows if r.status == AssignmentStatus.SUBMITTED]
    decisions = decide(ctx, fresh, stage_reviews(ctx))
    todo = [r for r in rows if r.status != AssignmentStatus.SUBMITTED or r.assignment_id in decisions]  # the rest is held
    done = 0
    ctx.cache[BEHIND_REVIEW] = False
    for first in range(0, len(todo), CHUNK):
        if first and time.monotonic() > deadline:
            ctx.cache[BEHIND_REVIEW] = True  # decisions left for the next pass: posting waits (see `post`)
            break
        actions = _intents(ctx, todo[first:first + CHUNK], decisions)
        outcomes: list[tuple[str, str]] = []
        stop = False
        for aid, status, note, decided_now in actions:
            crash_point("review.before_call")
            outcome: str | None
            try:
                if status == AssignmentStatus.APPROVING:
                    ctx.market.approve(aid, note)
                    outcome = AssignmentStatus.APPROVED
                else:
                    ctx.market.reject(aid, note or "Rejected.")
                    outcome = AssignmentStatus.REJECTED
            except TransientError as exc:
                ctx.store.event(ctx.name, "throttled" if exc.throttled else "marketplace_error",
                                f"reviewing {aid}: {exc.code or exc}", level="warning", subject=aid)
                stop = True
                break
            except InvalidState:
                try:
                    outcome = _read_back(ctx, aid)
                except TransientError as exc:  # the row stays approving/rejecting: read back again next tick
                    ctx.store.event(ctx.name, "throttled" if exc.throttled else "marketplace_error",
                                    f"reading back {aid}: {exc.code or exc}", level="warning", subject=aid)
                    stop = True
                    break
                if outcome is None:
                    continue  # still Submitted on the marketplace (eventual consistency): next tick
                if decided_now:  # not a retry of our own call: the marketplace decided before we did
                    ctx.store.event(ctx.name, "auto_approved" if outcome == AssignmentStatus.APPROVED else "rejected_remotely",
                                    f"{aid} was {outcome} on the marketplace", subject=aid)
            except MarketError as exc:
                ctx.store.event(ctx.name, "review_error", f"{aid}: {exc}", level="error", subject=aid)
                continue
            except Exception as exc:  # not the marketplace's answer but a failure of ours: held (the call may
                hold_assignment(ctx, aid, "review", exc)  # have happened: settling reads the outcome back)
                continue
            crash_point("review.after_call")
            outcomes.append((aid, outcome))
        _record_many(ctx, outcomes)
        done += len(outcomes)
        if stop:
            break
    return done


def _intents(ctx: Context, chunk: Sequence[Pending],
             decisions: dict[str, tuple[str, str | None]]) -> list[tuple[str, str, str | None, bool]]:
    """Write the chunk's fresh decisions (`approving` / `rejecting`) in one transaction, before any of
    its remote calls; returns (assignment, status, feedback, decided now) for every call to make.
    One commit per chunk rather than per assignment: each commit is a disk sync, and at tens of
    thousands of assignments the syncs, not the marketplace, bounded how fast work was decided."""
    actions = []
    with ctx.store.session() as s:
        rows = {row.assignment_id: row for row in s.exec(select(AssignmentRow).where(
            col(AssignmentRow.assignment_id).in_([r.assignment_id for r in chunk]))).all()}
        for r in chunk:
            row = rows.get(r.assignment_id)
            if row is None:
                raise LookupError(f"AssignmentRow {r.assignment_id!r} is missing from the store")
            decided_now = r.status == AssignmentStatus.SUBMITTED
            if decided_now:
                if row.status != AssignmentStatus.SUBMITTED:
                    continue
                action, why = decisions[r.assignment_id]
                row.status = AssignmentStatus.APPROVING if action == "approve" else AssignmentStatus.REJECTING
                row.feedback = why
                s.add(row)
            elif row.status not in (AssignmentStatus.APPROVING, AssignmentStatus.REJECTING):
                continue
            actions.append((row.assignment_id, row.status, row.feedback, decided_now))
    return actions


def _read_back(ctx: Context, assignment_id: str) -> str | None:
    status = ctx.market.get_assignment(assignment_id).status
    return status if status in (SubmissionStatus.APPROVED, SubmissionStatus.REJECTED) else None


def _record_many(ctx: Context, outcomes: list[tuple[str, str]]) -> None:
    """The outcomes of a chunk's calls with their ledger entries, in one transaction (a crash before it
    leaves the rows `approving`/`rejecting`: retried, read back, booked once). The chunk's rows, HITs
    and ledger refs are read with one query each: per assignment they were most of review's cost."""
    if not outcomes:
        return
    with ctx.store.session() as s:
        ids = [aid for aid, _ in outcomes]
        rows = {r.assignment_id: r for r in s.exec(select(AssignmentRow).where(col(AssignmentRow.assignment_id).in_(ids))).all()}
        keys = {r.hit_key for r in rows.values()}
        hits = {h.hit_key: h for h in s.exec(select(HitRow).where(HitRow.campaign == ctx.name, col(HitRow.hit_key).in_(keys))).all()}
        entries = []
        fees = fees_of(ctx.market)
        now = ctx.clock.now()
        for assignment_id, outcome in outcomes:
            row = rows.get(assignment_id)
            if row is None:
                raise LookupError(f"AssignmentRow {assignment_id!r} is missing from the store")
            hit = hits[row.hit_key]
            book = charge_row if outcome == AssignmentStatus.APPROVED else release_row
            entry = book(ctx.name, hit.hit_key, row.assignment_id, Decimal(hit.reward), hit.assignments, fees)
            if entry is not None:  # None: the assignment costs nothing here (paid per place of a study)
                entries.append(entry)
            row.status = outcome
            row.decided_at = now
            s.add(row)
        book_many(s, entries)


def close_finished_hits(ctx: Context) -> int:
    """Close HITs whose every slot is decided, or that expired with nothing pending; release the rest."""
    closed = 0
    now = ctx.clock.now()
    with ctx.store.session() as s:
        # only HITs that may close (every slot decided, or expired), found in SQL: reading every
        # assignment's status each pass made this step grow with the campaign, not with its new work
        n_decided = (select(func.count()).select_from(AssignmentRow)
                     .where(AssignmentRow.campaign == HitRow.campaign, AssignmentRow.hit_key == HitRow.hit_key,
                            col(AssignmentRow.status).in_((*DECIDED, AssignmentStatus.HELD))).scalar_subquery())
        hits = s.exec(select(HitRow).where(
            HitRow.campaign == ctx.name, HitRow.status == HitStatus.POSTED,
            or_(and_(col(HitRow.expires_at).is_not(None), col(HitRow.expires_at) <= now),
                n_decided >= col(HitRow.assignments))).order_by(col(HitRow.id))).all()
        decided: dict[str, int] = {}
        open_: dict[str, int] = {}
        held: dict[str, int] = {}  # held for the operator: closes the HIT, keeps its share reserved
        keys = [h.hit_key for h in hits]
        for i in range(0, len(keys), 500):
            for hk, st, n in s.exec(select(AssignmentRow.hit_key, AssignmentRow.status, func.count()).where(
                    AssignmentRow.campaign == ctx.name, col(AssignmentRow.hit_key).in_(keys[i:i + 500]))
                    .group_by(AssignmentRow.hit_key, AssignmentRow.status)).all():
                if st in DECIDED:
                    decided[hk] = decided.get(hk, 0) + n
                elif st == AssignmentStatus.HELD:
                    held[hk] = held.get(hk, 0) + n
                else:
                    open_[hk] = open_.get(hk, 0) + n
    # a HIT whose undecided work is all held closes like a decided one (held rows must not keep a
    # campaign from finishing), but with the held assignments' shares still reserved until settled
    for hit in hits:
        full = decided.get(hit.hit_key, 0) + held.get(hit.hit_key, 0) >= hit.assignments
        expired = hit.expires_at is not None and now >= hit.expires_at and not open_.get(hit.hit_key)
        if expired and not full:
            try:  # an expired HIT may still hold accepted work until its assignments' deadlines
                remote = ctx.market.get_hit(remote_id(hit))
            except MarketError:
                continue
            if not remote.closed or remote.pending:
                continue
            # a last look: anything submitted since the last collect must be stored before closing
            try:
                listed = ctx.market.submissions(remote_id(hit))
            except MarketError:
                continue
            store_assignments(ctx, hit, listed)
            if any(a.status == SubmissionStatus.SUBMITTED for a in listed):
                continue
            with ctx.store.session() as s:
                if s.exec(select(AssignmentRow.assignment_id).where(
                        AssignmentRow.hit_key == hit.hit_key, AssignmentRow.campaign == ctx.name,
                        col(AssignmentRow.status).in_((AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVING, AssignmentStatus.REJECTING)))).first():
                    continue
        if full or expired:
            with ctx.store.session() as s:
                row = get_row(s, HitRow, hit.id)
                row.status = HitStatus.CLOSED
                row.closed_at = now
                s.add(row)
                keep = Decimal(0)
                if held.get(hit.hit_key):  # the held work's shares: charged or released when it is settled
                    keep = held[hit.hit_key] * fees_of(ctx.market).assignment(Decimal(hit.reward), hit.assignments).total
                release_hit_rest(s, ctx.name, row.hit_key, keep=keep)
            closed += 1
    return closed
