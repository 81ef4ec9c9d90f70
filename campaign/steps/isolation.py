"""Isolation (DESIGN invariant 8): no single answer, HIT or bonus can stop a pass.

Two levels:

- A row a step fails on is *held* (`hold`): a `HeldRow` is written with the step and the error, with
  one `held` event (holding it again writes nothing), and the step goes on with the other rows. The
  steps leave held rows alone from then on: a held assignment (status `held`) is neither decided nor
  counted as evidence, a held draft (status `held`) is not posted, a held bonus is not sent. Holding
  moves no money: whatever the row reserved stays reserved until the operator settles it (`campaign
  decide`, carried out by `campaign.steps.settle`).
- A step that fails as a whole (`StepGuard`) is skipped for a number of passes that doubles with
  each failure in a row, up to `BACKOFF_MAX`; one `step_error` event starts the streak (another only
  when the error's type changes), and one `step_recovered` event ends it. The rest of the pass runs.

A marketplace that refuses a call is not a failure of ours (`MarketError`): the steps keep handling
those as before. What is held here is what nothing else caught: a bug, or data nobody foresaw.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from campaign.state import AssignmentStatus, HeldKind, HeldStatus
from campaign.steps.context import Context
from campaign.store import HeldRow, Store

log = logging.getLogger(__name__)

BACKOFF_MAX = 64  # passes a failing step waits at most before it is tried again
_PASS = "isolation:pass"
_FAILING = "isolation:failing"
_NOTED = "isolation:noted"


def describe(exc: BaseException) -> str:
    """An error as the operator sees it: its type and message, bounded."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:500] if text else type(exc).__name__


def hold(ctx: Context, row_kind: str, row_key: str, step: str, exc: BaseException | str, *,
         hit_key: str | None = None, worker_id: str | None = None, data: dict[str, Any] | None = None,
         session: Session | None = None) -> bool:
    """Quarantine one row; True when it is held now (the first time, with its one event).

    In `session` when given, so the hold commits with the step's own change of the row (e.g. the
    assignment stored with status `held`)."""
    error = exc if isinstance(exc, str) else describe(exc)

    def put(s: Session) -> bool:
        found = s.exec(select(HeldRow).where(HeldRow.campaign == ctx.name, HeldRow.row_kind == row_kind,
                                             HeldRow.row_key == row_key)).first()
        if found is not None and found.status == HeldStatus.HELD:
            return False
        if found is not None:  # settled before (e.g. posted again on the operator's word) and failed again
            found.status, found.step, found.error, found.held_at = HeldStatus.HELD, step, error, ctx.clock.now()
            found.decision = found.message = found.decided_at = found.settled_at = None
            found.data = json.dumps(data, sort_keys=True, default=str) if data else None
            s.add(found)
        elif not _insert(s, HeldRow(campaign=ctx.name, row_kind=row_kind, row_key=row_key, step=step, error=error,
                                    hit_key=hit_key, worker_id=worker_id, held_at=ctx.clock.now(),
                                    data=json.dumps(data, sort_keys=True, default=str) if data else None)):
            return False  # another writer held it first
        choices = "paid|unpaid" if row_kind == HeldKind.WORK else "approve|reject|drop"
        ctx.store.event(ctx.name, HeldStatus.HELD, f"{row_kind} {row_key} held by step {step}: {error}; the others go on "
                        f"(settle it with `campaign decide {ctx.name} {row_key} {choices}`)",
                        level="error", subject=row_key, data={"step": step, "row_kind": row_kind, "error": error,
                                                              "hit_key": hit_key}, session=s)
        return True

    if not isinstance(exc, str):
        log.error("campaign %s: step %s failed on %s %s", ctx.name, step, row_kind, row_key, exc_info=exc)
    if session is not None:
        return put(session)
    with ctx.store.session() as s:
        return put(s)


def hold_assignment(ctx: Context, assignment_id: str, step: str, exc: BaseException | str,
                    data: dict[str, Any] | None = None) -> bool:
    """Hold a stored assignment that is not decided yet: its status becomes `held` (review, quality
    control and scores leave it alone) in the same transaction as its HeldRow. False when it was
    decided meanwhile, or is held already."""
    from campaign.store import AssignmentRow

    with ctx.store.session() as s:
        row = s.get(AssignmentRow, assignment_id)
        if row is None or row.status not in (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVING, AssignmentStatus.REJECTING):
            return False
        intent = row.status
        row.status = AssignmentStatus.HELD
        s.add(row)
        return hold(ctx, HeldKind.ASSIGNMENT, assignment_id, step, exc, hit_key=row.hit_key, worker_id=row.worker_id,
                    data={"was": intent, **(data or {})}, session=s)


def note_once(ctx: Context, step: str, key: str, exc: BaseException) -> None:
    """A row the step could not handle this pass but may next (e.g. a HIT whose listing failed to be
    stored): tried again every pass, with one `row_error` event per row and kind of error for as long
    as this daemon runs, not one per pass."""
    noted: set[tuple[str, str, str]] = ctx.cache.setdefault(_NOTED, set())
    mark = (step, key, type(exc).__name__)
    if mark in noted:
        log.debug("campaign %s: step %s failed again on %s: %s", ctx.name, step, key, describe(exc))
        return
    noted.add(mark)
    log.error("campaign %s: step %s failed on %s", ctx.name, step, key, exc_info=exc)
    ctx.store.event(ctx.name, "row_error", f"step {step} failed on {key}: {describe(exc)}; the others go on, and it is "
                    "tried again each pass", level="error", subject=key, data={"step": step, "error": describe(exc)})


def settle_remotely(ctx: Context, s: Session, row_kind: str, row_key: str, outcome: str) -> None:
    """The marketplace settled a held row before the operator (auto-approval): its decision is booked
    by the caller, and the hold is over."""
    row = s.exec(select(HeldRow).where(HeldRow.campaign == ctx.name, HeldRow.row_kind == row_kind,
                                       HeldRow.row_key == row_key, HeldRow.status == HeldStatus.HELD)).first()
    if row is None:
        return
    row.status, row.outcome, row.settled_at = HeldStatus.SETTLED, outcome[:1000], ctx.clock.now()
    s.add(row)
    ctx.store.event(ctx.name, "held_settled", f"{row_kind} {row_key}: {outcome}", subject=row_key, session=s)


def _insert(s: Session, row: HeldRow) -> bool:
    try:
        with s.begin_nested():
            s.add(row)
    except IntegrityError:
        return False
    return True


def held_keys(ctx: Context, row_kind: str) -> set[str]:
    """The keys of this campaign's rows of `row_kind` that are held and not settled yet."""
    with ctx.store.session() as s:
        return set(s.exec(select(HeldRow.row_key).where(HeldRow.campaign == ctx.name, HeldRow.row_kind == row_kind,
                                                        HeldRow.status == HeldStatus.HELD)).all())


def pending_decisions(store: Store, campaign: str) -> int:
    """How many of the campaign's held rows the operator decided and the daemon has not carried out yet."""
    with store.session() as s:
        return int(s.exec(select(func.count()).select_from(HeldRow).where(
            HeldRow.campaign == campaign, HeldRow.status == HeldStatus.HELD, col(HeldRow.decision).is_not(None))).one())


@dataclass
class _Failing:
    failures: int
    retry_at: int  # the pass number from which the step is tried again
    error_type: str


class StepGuard:
    """Runs the steps of a pass so that one failing step costs only itself (see the module's doc).

    Kept in the Context's cache (per daemon, not state): after a restart a still failing step writes
    its event once more."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.failing: dict[str, _Failing] = ctx.cache.setdefault(_FAILING, {})

    @staticmethod
    def next_pass(ctx: Context) -> int:
        ctx.cache[_PASS] = n = int(ctx.cache.get(_PASS, 0)) + 1
        return n

    def run(self, name: str, fn: Callable[[], Any]) -> bool:
        """Run `fn` as step `name` unless it is backing off; True when it ran and succeeded."""
        ctx = self.ctx
        now = int(ctx.cache.get(_PASS, 0))
        state = self.failing.get(name)
        if state is not None and now < state.retry_at:
            return False
        try:
            fn()
        except Exception as exc:
            failures = state.failures + 1 if state is not None else 1
            wait = min(2 ** (failures - 1), BACKOFF_MAX)
            self.failing[name] = _Failing(failures, now + wait, type(exc).__name__)
            if state is None or state.error_type != type(exc).__name__:
                log.exception("campaign %s: step %s failed", ctx.name, name)
                self._event("step_error", f"step {name} failed: {describe(exc)}; the rest of the pass goes on, and the "
                            f"step is tried again after {wait} pass(es), waiting twice as long after each failure "
                            f"(at most {BACKOFF_MAX} passes)", level="error", subject=name)
            else:
                log.debug("campaign %s: step %s failed again (%d in a row): %s", ctx.name, name, failures, describe(exc))
            return False
        if state is not None:
            del self.failing[name]
            self._event("step_recovered", f"step {name} ran again after {state.failures} failure(s) in a row", subject=name)
        return True

    def _event(self, kind: str, message: str, level: str = "info", subject: str | None = None) -> None:
        try:
            self.ctx.store.event(self.ctx.name, kind, message, level=level, subject=subject)
        except Exception:  # the store itself is failing: the log has it
            log.exception("campaign %s: cannot record %s", self.ctx.name, kind)
