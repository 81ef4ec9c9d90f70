"""Carrying out the operator's decisions on held rows (`campaign decide`), like any other decision.

`campaign decide` only writes the decision into the held row (the intent, in the store, as every other
operation from the command line); this step carries it out through the ledger and the marketplace with
the usual intent-call-record care, and runs in every pass, also for a finished or cancelled campaign
that still has decisions waiting (`campaign run` resumes it for them).

What each decision means (docs/operations-held.md):

- an assignment: `approve` approves it on the marketplace and charges its share of the HIT's
  reservation; `reject` rejects it (with the operator's message) and releases its share; `drop`
  approves and pays it like `approve` (the worker did the work; the failure to use it was ours) and
  leaves its answer out of every score and of quality control. If the marketplace decided first
  (auto-approval), its decision is the one booked.
- a HIT held before it was posted: `approve` posts it again (same token: a HIT an earlier attempt did
  create is found, not made twice); `reject` and `drop` abandon it: its reservation is released, or, if
  the marketplace did create it, it is adopted, expired at once, and its work handled as usual.
- a bonus held before it was sent: `approve` sends it (its reservation becomes a charge); `reject` and
  `drop` release its reservation.
- a payment that may have gone through unrecorded and never showed on a study marketplace (Prolific: a
  quality bonus held as "may have been sent", or a returned submission's work pay, row `work:SUBMISSION`):
  the researcher checks the study's payments there and says `paid` (booked as spent, nothing sent) or
  `unpaid` (sent now, then booked). The program never guesses: paying again could pay twice, releasing
  the money could leave a payment unbooked.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from decimal import Decimal

from sqlmodel import col, delete, select

from campaign.crash import crash_point
from campaign.ledger import (
    BudgetExceeded,
    book_many,
    charge_bonus,
    charge_place,
    charge_row,
    release_bonus,
    release_hit_rest,
    release_row,
    reserve_bonus,
)
from campaign.marketplaces.base import (
    AlreadyDone,
    InvalidState,
    MarketError,
    Studies,
    TransientError,
    fees_of,
    work_key,
)
from campaign.state import (
    AssignmentStatus,
    BonusState,
    Decision,
    HeldKind,
    HeldStatus,
    HitStatus,
    Keys,
    SubmissionStatus,
)
from campaign.steps.context import Context, get_row
from campaign.steps.isolation import describe
from campaign.steps.quality_pass import bonus_token
from campaign.store import AssignmentRow, HeldRow, HitRow, JudgmentRow, LedgerRow

log = logging.getLogger(__name__)

REJECT_MESSAGE = "Your answer could not be used for this task."


def settle_decisions(ctx: Context) -> int:
    """Carry out every decision waiting on a held row; returns how many rows were settled now."""
    with ctx.store.session() as s:
        todo = s.exec(select(HeldRow).where(HeldRow.campaign == ctx.name, HeldRow.status == HeldStatus.HELD,
                                            col(HeldRow.decision).is_not(None))
                      .order_by(col(HeldRow.decided_at), col(HeldRow.id))).all()
    settled = 0
    for held in todo:
        try:
            outcome = _SETTLE[held.row_kind](ctx, held)
        except TransientError as exc:  # throttled or cut off: the same call again next pass
            ctx.store.event(ctx.name, "throttled" if exc.throttled else "marketplace_error",
                            f"settling {held.row_key}: {exc}", level="warning", subject=held.row_key)
            break
        except (MarketError, LookupError) as exc:  # refused for good: the operator decides again
            _refused(ctx, held, describe(exc))
            continue
        except Exception as exc:  # a failure of ours on this row: it stays held, the other decisions go on
            log.error("campaign %s: settling %s failed", ctx.name, held.row_key, exc_info=exc)
            _refused(ctx, held, describe(exc))
            continue
        if outcome is None:
            continue
        _settled(ctx, held, outcome)
        settled += 1
    return settled


def _settled(ctx: Context, held: HeldRow, outcome: str) -> None:
    with ctx.store.session() as s:
        row = get_row(s, HeldRow, held.id)
        row.status, row.outcome, row.settled_at = HeldStatus.SETTLED, outcome[:1000], ctx.clock.now()
        s.add(row)
        ctx.store.event(ctx.name, "held_settled", f"{row.row_kind} {row.row_key}: {row.decision}: {outcome}",
                        subject=row.row_key, session=s)


def _refused(ctx: Context, held: HeldRow, why: str) -> None:
    """The decision cannot be carried out: the row stays held, the decision is withdrawn (one event)."""
    with ctx.store.session() as s:
        row = get_row(s, HeldRow, held.id)
        row.outcome = f"{row.decision} could not be carried out: {why}"[:1000]
        row.decision = None
        s.add(row)
        if row.row_kind == HeldKind.ASSIGNMENT:  # an intent written for the call goes back to held: review leaves it alone
            a = s.get(AssignmentRow, row.row_key)
            if a is not None and a.status in (AssignmentStatus.APPROVING, AssignmentStatus.REJECTING):
                a.status = AssignmentStatus.HELD
                s.add(a)
        ctx.store.event(ctx.name, "held_decision_failed", f"{row.row_kind} {row.row_key}: {row.outcome}; still held",
                        level="warning", subject=row.row_key, session=s)


# -- assignments -------------------------------------------------------------------------------------------
def _assignment(ctx: Context, held: HeldRow) -> str | None:
    aid = held.row_key
    with ctx.store.session() as s:
        row = get_row(s, AssignmentRow, aid)
        if row.status == AssignmentStatus.HELD:  # the intent, before the call
            row.status = AssignmentStatus.REJECTING if held.decision == Decision.REJECT else AssignmentStatus.APPROVING
            row.feedback = (held.message or REJECT_MESSAGE) if held.decision == Decision.REJECT else held.message
            s.add(row)
        status, feedback = row.status, row.feedback
    if status in (AssignmentStatus.APPROVING, AssignmentStatus.REJECTING):
        crash_point("settle.before_call")
        try:
            if status == AssignmentStatus.APPROVING:
                ctx.market.approve(aid, feedback)
                outcome: str = AssignmentStatus.APPROVED
            else:
                ctx.market.reject(aid, feedback or REJECT_MESSAGE)
                outcome = AssignmentStatus.REJECTED
        except InvalidState:  # decided before (our own call whose answer was lost, or auto-approval)
            remote = ctx.market.get_assignment(aid).status
            if remote not in (SubmissionStatus.APPROVED, SubmissionStatus.REJECTED):
                return None  # still submitted there (eventual consistency): next pass
            outcome = remote
        crash_point("settle.after_call")
        _record(ctx, aid, outcome)
    with ctx.store.session() as s:
        row = get_row(s, AssignmentRow, aid)
        if row.status not in (AssignmentStatus.APPROVED, AssignmentStatus.REJECTED):
            return None
        if held.decision == Decision.DROP and row.status == AssignmentStatus.APPROVED:
            s.exec(delete(JudgmentRow).where(col(JudgmentRow.assignment_id) == aid))
            row.valid = False
            row.error = f"dropped by the operator: {held.message or held.error}"[:500]
            s.add(row)
            return "approved and paid on the marketplace; its answer is left out of the results"
        if row.status == _DECIDED_AS.get(held.decision or ""):
            return f"{row.status} on the marketplace"
        return f"the marketplace had {row.status} it already; booked as {row.status}"


# the status an assignment ends in when the marketplace carried out the operator's decision
_DECIDED_AS: dict[str, AssignmentStatus] = {Decision.APPROVE: AssignmentStatus.APPROVED, Decision.REJECT: AssignmentStatus.REJECTED,
                                            Decision.DROP: AssignmentStatus.APPROVED}


def _record(ctx: Context, aid: str, outcome: str) -> None:
    """The call's outcome with its ledger entry, in one transaction (the share of the HIT's
    reservation charged or released, once: the refs are the assignment's, as in review)."""
    with ctx.store.session() as s:
        row = get_row(s, AssignmentRow, aid)
        if row.status in (AssignmentStatus.APPROVED, AssignmentStatus.REJECTED):
            return
        hit = s.exec(select(HitRow).where(HitRow.campaign == ctx.name, HitRow.hit_key == row.hit_key)).one()
        book = charge_row if outcome == AssignmentStatus.APPROVED else release_row
        entry = book(ctx.name, hit.hit_key, aid, Decimal(hit.reward), hit.assignments, fees_of(ctx.market))
        book_many(s, [entry] if entry is not None else [])
        row.status = outcome
        row.decided_at = ctx.clock.now()
        s.add(row)


# -- HITs held before posting ------------------------------------------------------------------------------
def _hit(ctx: Context, held: HeldRow) -> str | None:
    with ctx.store.session() as s:
        hit = s.exec(select(HitRow).where(HitRow.campaign == ctx.name, HitRow.hit_key == held.row_key)).one()
    if hit.status != HitStatus.HELD:
        return f"already {hit.status}"
    if held.decision == Decision.APPROVE:
        with ctx.store.session() as s:
            row = get_row(s, HitRow, hit.id)
            row.status = HitStatus.POSTING  # reserved already: the post step finishes it with the same token
            s.add(row)
        return "posting again (its reservation kept)"
    found = ctx.market.find_by_annotation(hit.annotation)
    if found is not None:  # the failed attempt did create it: adopt it, stop new work on it
        ctx.market.expire_hit(found.hit_id, ctx.clock.now())
        with ctx.store.session() as s:
            row = get_row(s, HitRow, hit.id)
            row.hit_id, row.hit_type_id, row.status = found.hit_id, found.type_id, HitStatus.POSTED
            row.posted_at, row.expires_at = ctx.clock.now(), ctx.clock.now()
            s.add(row)
        return f"it had been posted as {found.hit_id}: expired now, its work handled as usual"
    with ctx.store.session() as s:
        row = get_row(s, HitRow, hit.id)
        row.status = HitStatus.FAILED
        row.error = f"dropped by the operator: {held.error}"[:1000]
        s.add(row)
        freed = release_hit_rest(s, ctx.name, row.hit_key)
    return f"not posted; {freed} of reservation released"


# -- bonuses held before they were sent ----------------------------------------------------------------------
def _bonus(ctx: Context, held: HeldRow) -> str | None:
    worker = held.row_key.removeprefix(Keys.BONUS)
    data = json.loads(held.data or "{}")
    if not data.get("assignment_id"):
        raise LookupError(f"no approved assignment of {worker} to pay a bonus on")
    amount, aid = Decimal(data["amount"]), str(data["assignment_id"])
    fees = fees_of(ctx.market)
    with ctx.store.session() as s:
        reserved = s.exec(select(LedgerRow.id).where(LedgerRow.campaign == ctx.name,
                                                     LedgerRow.ref == f"bonus_reserve:{worker}")).first() is not None
    if held.decision in UNCERTAIN_DECISIONS:
        if not data.get("may_have_been_sent") or not isinstance(ctx.market, Studies):
            raise LookupError(f"{held.decision} is for a payment that may have been sent on a study marketplace; "
                              "this bonus is settled with approve, reject or drop")
        _resolve(ctx.market, bonus_token(ctx, worker), held.decision == Decision.PAID)
        if held.decision == Decision.PAID:
            with ctx.store.session() as s:
                try:
                    reserve_bonus(s, ctx.name, ctx.campaign.budget, worker, amount, aid, fees)  # kept if reserved before
                except BudgetExceeded:
                    pass  # it was paid: booked all the same (the ledger records what happened)
                charge_bonus(s, ctx.name, worker, amount, aid, fees)
                ctx.store.set_kv(ctx.name, Keys.bonus(worker), BonusState.PAID, session=s)
            return f"bonus of {amount} booked as paid (the researcher saw it on the marketplace; nothing sent)"
    elif held.decision != Decision.APPROVE:
        if data.get("may_have_been_sent"):  # the marketplace may have paid it: only `approve` books that truly
            raise LookupError("the bonus may have been sent already; `approve` books it once (sending it again "
                              "with its token pays nothing twice)")
        with ctx.store.session() as s:
            if reserved:
                release_bonus(s, ctx.name, worker, amount, aid, fees)
            ctx.store.set_kv(ctx.name, Keys.bonus(worker), BonusState.PAID, session=s)  # settled: never sent
        return "not paid; its reservation released" if reserved else "not paid (nothing was reserved)"
    with ctx.store.session() as s:
        try:
            reserve_bonus(s, ctx.name, ctx.campaign.budget, worker, amount, aid, fees)  # once: kept if reserved before
        except BudgetExceeded as exc:
            raise LookupError(str(exc)) from None
        ctx.store.set_kv(ctx.name, Keys.bonus(worker), BonusState.SENDING, session=s)
    try:
        ctx.market.bonus(worker, aid, amount, data.get("reason") or "Thank you for careful work.", bonus_token(ctx, worker))
    except AlreadyDone:
        pass
    except MarketError as exc:
        if not isinstance(exc, TransientError):  # refused: still held (the quality step must not send it)
            ctx.store.set_kv(ctx.name, Keys.bonus(worker), BonusState.HELD)
        raise
    with ctx.store.session() as s:
        charge_bonus(s, ctx.name, worker, amount, aid, fees)
        ctx.store.set_kv(ctx.name, Keys.bonus(worker), BonusState.PAID, session=s)
    return f"bonus of {amount} paid"


# -- uncertain work pay of a study submission --------------------------------------------------------------
UNCERTAIN_DECISIONS = (Decision.PAID, Decision.UNPAID)


def _resolve(market: Studies, key: str, paid: bool) -> None:
    """Tell the marketplace's journal; a row already resolved (a crash after this, before the booking)
    keeps what its journal says."""
    try:
        market.resolve_uncertain(key, paid)
    except LookupError:
        pass


def _work(ctx: Context, held: HeldRow) -> str | None:
    data = json.loads(held.data or "{}")
    market = ctx.market
    if not isinstance(market, Studies):
        raise LookupError("this campaign's marketplace pays no study submissions")
    if held.decision not in UNCERTAIN_DECISIONS:
        raise LookupError(f"{held.row_key} may have been paid: say `paid` or `unpaid` after checking the study's "
                          "bonus payments on the marketplace")
    key, submission, amount = str(data["study_key"]), str(data["submission_id"]), Decimal(data["amount"])
    _resolve(market, work_key(submission), held.decision == Decision.PAID)
    cost = fees_of(market).bonus(amount)
    if held.decision == Decision.UNPAID:
        cost = market.pay_work(key, submission, amount)  # TransientError: the same next pass
    with ctx.store.session() as s:
        charge_place(s, ctx.name, key, submission, cost)
    if held.decision == Decision.PAID:
        return f"work pay of {amount} booked as paid (the researcher saw it on the marketplace; nothing sent)"
    return f"work pay of {amount} paid now"


_SETTLE: dict[str, Callable[[Context, HeldRow], str | None]] = {HeldKind.ASSIGNMENT: _assignment, HeldKind.HIT: _hit, HeldKind.BONUS: _bonus,
                                                                 HeldKind.WORK: _work}
