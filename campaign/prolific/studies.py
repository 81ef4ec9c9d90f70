"""The remote side of a Prolific campaign, made crash-safe: studies per stage, places, decisions on
submissions, bonuses.

Prolific has no request tokens, so every remote call that changes something is preceded by a record of
the intent in a journal (the store's `prolific_*` tables, per campaign) and followed by a record of the
outcome, each in its own transaction; a restart finds the intent and reconciles with what the server has instead of repeating the
call blindly:

- a study is found again by its unique `internal_name` (listed) before a second one is created;
- places are set to an absolute number, never added, and only ever raised (Prolific refuses decreases);
- a decision is sent only while the submission is still AWAITING REVIEW (transitions are final, and the
  status tells whether an earlier attempt got through);
- paying a bonus batch is NOT idempotent and is asynchronous (Prolific pays "in the following minutes"):
  the journal marks "paying" before the call, and a bonus found in that state (a crash, or an answer
  lost, between the call and its record) is never paid again automatically. It is reconciled instead:
  once the submission's `bonus_payments` show it (more payments of its amount than the journal's other
  paid bonuses of that amount to the submission) it is "paid"; until then `BonusPending` (try again
  later); after `reconcile_seconds` without it, "uncertain" (`BonusUncertain`), for the researcher to
  check on Prolific, never decided by the program.

This is the part the marketplace adapter needs from Prolific; the HITs themselves live on the built-in
marketplace behind the task site (`campaign.market.prolific_site`).
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from sqlmodel import SQLModel, col, func, select

from campaign.crash import crash_point
from campaign.marketplaces.base import PaymentUncertain
from campaign.prolific.hooks import StudyWatch
from campaign.prolific.verdict import Verdict
from campaign.state import ProlificBonusState, ProlificDecisionState, ProlificStudyState
from campaign.store import ProlificBonusRow, ProlificDecisionRow, ProlificStudyRow, Store

FINAL = ("APPROVED", "REJECTED", "RETURNED", "TIMED-OUT", "SCREENED OUT")
RECONCILE_SECONDS = 900.0  # how long a pay call's payment may take to show ("in the following minutes")
log = logging.getLogger(__name__)
UNCERTAIN = ProlificBonusState.UNCERTAIN  # a bonus state: maybe paid, not visible on Prolific in time; the researcher decides


class BonusPending(Exception):
    """A pay call may have gone through and its payment does not show yet: ask again later (it is never
    paid twice)."""


class BonusUncertain(PaymentUncertain):
    """A pay call may have gone through and its payment did not show within the reconciliation time: the
    program will not pay it again; the researcher checks on Prolific."""


USAGE_KEY = "prolific.api_usage"  # kv: this campaign's Prolific API calls and submissions, for `status` and `run`


class ProlificStudies:
    def __init__(self, api: Any, store: Store, campaign: str, *, reconcile_seconds: float = RECONCILE_SECONDS,
                 now: Callable[[], float] = time.time, watch: StudyWatch | None = None) -> None:
        """The journal of `campaign` in `store`. `now` is wall time: Prolific processes a payment in real
        minutes, whatever a run's clock says. `watch`: with webhooks, which studies must be listed again
        (`campaign.prolific.hooks.StudyWatch`); without, every listing asks Prolific."""
        self.api = api
        self.store = store
        self.campaign = campaign
        self.reconcile_seconds = reconcile_seconds
        self._now = now
        self._lock = threading.RLock()
        self.watch = watch
        usage = json.loads(store.get_kv(campaign, USAGE_KEY, "") or "{}")
        self._calls_before = int(usage.get("api_calls", 0))  # earlier runs' calls (this client counts from 0)
        self._submissions_before = int(usage.get("submissions", 0))
        self._seen: set[str] = set()
        self._usage_written: dict[str, Any] = usage

    # -- listings and what they cost --------------------------------------------------------------------
    def submissions_of(self, study_id: str, *, fresh: bool = False) -> list[dict[str, Any]]:
        """A study's submissions: from Prolific, or with webhooks the last listing while no hook said one
        of them changed (`StudyWatch`); `fresh` asks Prolific in any case."""
        if self.watch is None:
            rows = list(self.api.submissions(study_id))
        else:
            rows = self.watch.listing(study_id, lambda: list(self.api.submissions(study_id)), fresh=fresh)
        self._seen.update(str(r.get("id")) for r in rows)
        return rows

    def usage(self) -> dict[str, Any]:
        """Prolific API calls made for this campaign (every run's) and the submissions its studies had."""
        calls = self._calls_before + int(getattr(self.api, "calls", 0))
        subs = max(self._submissions_before, len(self._seen))
        return {"api_calls": calls, "submissions": subs, "per_submission": round(calls / subs, 2) if subs else None,
                "webhooks": self.watch is not None}

    def note_usage(self) -> None:
        """Write `usage()` to the store when it changed (read by `status --json` and the end of `run`)."""
        now = self.usage()
        if now != self._usage_written:
            try:
                self.store.set_kv(self.campaign, USAGE_KEY, json.dumps(now, sort_keys=True))
            except Exception as exc:  # noqa: BLE001 - a figure, never the reason a pass fails: written next time
                log.warning("API usage of %s not recorded: %s", self.campaign, exc)
                return
            self._usage_written = now

    def close(self) -> None:
        """Nothing to release: the store is its opener's."""

    def _set(self, model: type[SQLModel], row_id: int | None, **values: Any) -> None:
        """Record a step: one transaction, committed before the caller goes on (to a remote call)."""
        with self.store.session() as s:
            row = s.get(model, row_id)
            assert row is not None
            for name, value in values.items():
                setattr(row, name, value)
            s.add(row)

    # -- studies ------------------------------------------------------------------------------------------
    def study(self, key: str) -> ProlificStudyRow | None:
        with self.store.session() as s:
            return s.exec(select(ProlificStudyRow).where(ProlificStudyRow.campaign == self.campaign,
                                                         ProlificStudyRow.key == key)).first()

    def ensure_study(self, key: str, places: int, body: Callable[[str, str, int], dict[str, Any]]) -> str:
        """The published study of `key` (a stage, or a ranking batch), created on the first call.
        `body(internal_name, completion_code, places)` gives the draft's fields (`study.study_body`)."""
        with self._lock:
            row = self.study(key)
            if row is None:
                tag = secrets.token_hex(6)
                with self.store.session() as s:
                    s.add(ProlificStudyRow(campaign=self.campaign, key=key, internal_name=f"campaign:{key}:{tag}",
                                           completion_code="C" + tag.upper(), state=ProlificStudyState.INTENT, places=places))
                row = self.study(key)
            assert row is not None
            if row.state == ProlificStudyState.INTENT:
                found = [s for s in self.api.studies() if s.get("internal_name") == row.internal_name]
                sid = found[0]["id"] if found else self.api.create_study(
                    body(row.internal_name, row.completion_code, row.places))["id"]
                crash_point("prolific.after_create_study")
                self._set(ProlificStudyRow, row.id, study_id=sid, state=ProlificStudyState.CREATED)
                row = self.study(key)
                assert row is not None
            if row.state == ProlificStudyState.CREATED:
                if self.api.study(row.study_id)["status"] == "UNPUBLISHED":
                    self.api.transition_study(row.study_id, "PUBLISH")
                    crash_point("prolific.after_publish")
                self._set(ProlificStudyRow, row.id, state=ProlificStudyState.PUBLISHED)
            return str(row.study_id)

    def raise_places(self, key: str, places: int) -> int:
        """Places only increase: returns the study's places after the call."""
        with self._lock:
            row = self.study(key)
            if row is None or row.study_id is None:
                raise KeyError(key)
            remote = int(self.api.study(row.study_id)["total_available_places"])
            if places > remote and row.state not in (ProlificStudyState.STOPPING, ProlificStudyState.STOPPED):
                self.api.update_study(row.study_id, total_available_places=places)  # more places would reopen it
                crash_point("prolific.after_places")
                remote = places
            self._set(ProlificStudyRow, row.id, places=remote)
            return remote

    def stop(self, key: str) -> None:
        """Take no more participants. Prolific stops only an ACTIVE or PAUSED study; one AWAITING REVIEW
        (every place finished), or COMPLETED by itself, becomes ACTIVE again when a place frees (a return,
        a time-out, a rejection), so it stays `stopping` and is stopped on a later call, once it is
        ACTIVE. `stopping` is recorded first: from then on no places are added (`raise_places`)."""
        with self._lock:
            row = self.study(key)
            if row is None or row.study_id is None or row.state == ProlificStudyState.STOPPED:
                return
            if row.state != ProlificStudyState.STOPPING:
                self._set(ProlificStudyRow, row.id, state=ProlificStudyState.STOPPING)
            if self.api.study(row.study_id)["status"] in ("ACTIVE", "PAUSED"):
                self.api.transition_study(row.study_id, "STOP")
                crash_point("prolific.after_stop")
                self._set(ProlificStudyRow, row.id, state=ProlificStudyState.STOPPED)

    def stopping(self, key: str) -> bool:
        """The study is being or has been stopped: it gets no more places."""
        row = self.study(key)
        return row is not None and row.state in (ProlificStudyState.STOPPING, ProlificStudyState.STOPPED)

    def study_ids(self) -> list[tuple[str, str]]:
        """(key, study id) of every study created so far, in the order they were planned."""
        with self.store.session() as s:
            rows = s.exec(select(ProlificStudyRow.key, ProlificStudyRow.study_id)
                          .where(ProlificStudyRow.campaign == self.campaign, col(ProlificStudyRow.study_id).is_not(None))
                          .order_by(col(ProlificStudyRow.id))).all()
        return [(str(k), str(sid)) for k, sid in rows]

    def now(self) -> float:
        """The service's time as this journal reckons it (wall time, or the run's clock)."""
        return self._now()

    def decided(self) -> set[str]:
        """Submissions whose decision is final on Prolific (nothing more to send)."""
        with self.store.session() as s:
            return set(s.exec(select(ProlificDecisionRow.submission_id).where(
                ProlificDecisionRow.campaign == self.campaign, ProlificDecisionRow.state == ProlificDecisionState.DONE)).all())

    # -- decisions ------------------------------------------------------------------------------------------
    def _decision(self, submission_id: str) -> ProlificDecisionRow | None:
        with self.store.session() as s:
            return s.exec(select(ProlificDecisionRow).where(ProlificDecisionRow.campaign == self.campaign,
                                                            ProlificDecisionRow.submission_id == submission_id)).first()

    def decide(self, submission_id: str, verdict: Verdict) -> str:
        """Send a bundle's verdict once; returns the submission's status afterwards."""
        if verdict.action not in ("approve", "reject"):
            raise ValueError("only a final verdict is sent")
        with self._lock:
            row = self._decision(submission_id)
            if row is None:
                with self.store.session() as s:
                    s.add(ProlificDecisionRow(campaign=self.campaign, submission_id=submission_id, action=verdict.action,
                                              state=ProlificDecisionState.INTENT))
                row = self._decision(submission_id)
                assert row is not None
            elif row.state == ProlificDecisionState.DONE:
                return str(self.api.submission(submission_id)["status"])
            status = str(self.api.submission(submission_id)["status"])
            if status == "AWAITING REVIEW":
                crash_point("prolific.before_decision")
                if verdict.action == "approve":
                    status = str(self.api.approve(submission_id)["status"])
                else:
                    status = str(self.api.reject(submission_id, verdict.message or "", verdict.category or "OTHER")["status"])
                crash_point("prolific.after_decision")
            if status in FINAL:
                self._set(ProlificDecisionRow, row.id, state=ProlificDecisionState.DONE)
            return status

    # -- bonuses --------------------------------------------------------------------------------------------------
    def _bonus(self, key: str) -> ProlificBonusRow | None:
        with self.store.session() as s:
            return s.exec(select(ProlificBonusRow).where(ProlificBonusRow.campaign == self.campaign,
                                                         ProlificBonusRow.key == key)).first()

    def bonus(self, key: str, study_id: str, submission_id: str, amount: Decimal) -> str:
        """Pay `amount` (major units) to a submission once per `key`; returns "paid", or raises
        `BonusPending` / `BonusUncertain` for a bonus whose pay call may have gone through unrecorded."""
        cents = int((Decimal(amount) * 100).to_integral_value())
        if cents <= 0 or Decimal(cents) != Decimal(amount) * 100:
            raise ValueError(f"a bonus is a positive amount in whole cents, not {amount}")
        with self._lock:
            row = self._bonus(key)
            if row is None:
                with self.store.session() as s:
                    s.add(ProlificBonusRow(campaign=self.campaign, key=key, study_id=study_id, submission_id=submission_id,
                                           cents=cents, state=ProlificBonusState.INTENT))
                row = self._bonus(key)
            assert row is not None
            if row.state == ProlificBonusState.INTENT:
                # Creating a batch pays nothing: a batch an interrupted attempt left behind costs nothing.
                batch = self.api.create_bonus(study_id, [(submission_id, Decimal(cents) / 100)])
                crash_point("prolific.after_create_bonus")
                self._set(ProlificBonusRow, row.id, batch_id=batch["id"], state=ProlificBonusState.CREATED)
                row = self._bonus(key)
                assert row is not None
            if row.state in (ProlificBonusState.PAYING, UNCERTAIN):
                return self._reconcile(row)
            if row.state == ProlificBonusState.CREATED:
                crash_point("prolific.before_pay")  # nothing sent, nothing recorded: a restart pays it
                self._set(ProlificBonusRow, row.id, state=ProlificBonusState.PAYING)
                # From here a crash cannot be told from a call whose answer was lost: the bonus is reconciled,
                # then uncertain for the researcher (never paid twice), who says which it was with
                # `campaign decide NAME KEY paid|unpaid` (`resolve_uncertain`).
                crash_point("prolific.pay_unrecorded")
                try:
                    self.api.pay_bonus(row.batch_id)
                except Exception as exc:
                    if 400 <= int(getattr(exc, "status", 0)) < 500:  # refused: nothing was paid, it may be tried again
                        self._set(ProlificBonusRow, row.id, state=ProlificBonusState.CREATED)
                    raise  # otherwise (no answer, 5xx) it may have been paid: reconciled from now on
                crash_point("prolific.after_pay")
                self._set(ProlificBonusRow, row.id, state=ProlificBonusState.PAID)
            return ProlificBonusState.PAID

    def bonus_paid(self, key: str) -> bool:
        """The bonus of `key` was paid (its pay call recorded, or reconciled from Prolific)."""
        row = self._bonus(key)
        return row is not None and row.state == ProlificBonusState.PAID

    def resolve_uncertain(self, key: str, paid: bool) -> str:
        """The researcher's word on an uncertain bonus, after checking the study's bonus payments on
        Prolific: `paid` records it as paid (nothing is called); not paid puts it back to "created", so
        the next `bonus` call pays its batch (Prolific pays a batch again on every pay call, which is
        what is wanted for a payment that never left). Anything but an uncertain bonus is refused:
        the program's own record stands where it has one."""
        with self._lock:
            row = self._bonus(key)
            if row is None or row.state != UNCERTAIN:
                raise LookupError(f"no uncertain bonus {key!r} in campaign {self.campaign}'s journal"
                                  + (f" (it is {row.state})" if row is not None else ""))
            self._set(ProlificBonusRow, row.id, state=ProlificBonusState.PAID if paid else ProlificBonusState.CREATED,
                      checking_since=None)
            return ProlificBonusState.PAID if paid else ProlificBonusState.CREATED

    def uncertain_bonuses(self) -> list[tuple[str, str, int]]:
        """(key, submission id, cents) of every bonus that may have been paid but never showed."""
        with self.store.session() as s:
            rows = s.exec(select(ProlificBonusRow).where(ProlificBonusRow.campaign == self.campaign,
                                                         ProlificBonusRow.state == UNCERTAIN)
                          .order_by(col(ProlificBonusRow.id))).all()
        return [(r.key, r.submission_id, int(r.cents)) for r in rows]

    def _reconcile(self, row: ProlificBonusRow) -> str:
        """A bonus whose pay call may have gone through: paid once Prolific shows it, never called again."""
        if self._shows_paid(row):
            self._set(ProlificBonusRow, row.id, state=ProlificBonusState.PAID, checking_since=None)
            return ProlificBonusState.PAID
        now = self._now()
        since = row.checking_since
        if since is None:
            since = now
            self._set(ProlificBonusRow, row.id, checking_since=since)
        amount = f"{Decimal(row.cents) / 100:.2f}"
        if row.state == UNCERTAIN or now - since >= self.reconcile_seconds:
            self._set(ProlificBonusRow, row.id, state=UNCERTAIN)
            raise BonusUncertain(f"bonus of {amount} to submission {row.submission_id} (batch {row.batch_id}): the pay "
                                 f"call may have gone through, and no payment showed on Prolific within "
                                 f"{self.reconcile_seconds / 60:.0f} minutes; it is not paid again automatically: check the "
                                 "study's bonus payments on Prolific")
        raise BonusPending(f"bonus of {amount} to submission {row.submission_id}: a pay call may have gone through; "
                           f"waiting for Prolific to show it (checked for {now - since:.0f} s), never paid twice")

    def _shows_paid(self, row: ProlificBonusRow) -> bool:
        """The submission lists one entry per bonus payment that reached it: more entries of this amount
        than the journal's other paid bonuses of the same amount to it means this one got through."""
        with self.store.session() as s:
            paid_others = int(s.exec(select(func.count()).select_from(ProlificBonusRow).where(
                ProlificBonusRow.campaign == self.campaign, ProlificBonusRow.submission_id == row.submission_id,
                ProlificBonusRow.cents == row.cents, ProlificBonusRow.state == ProlificBonusState.PAID,
                ProlificBonusRow.key != row.key)).one())
        remote = self.api.submission(row.submission_id).get("bonus_payments") or []
        return sum(1 for x in remote if int(x) == int(row.cents)) > paid_others
