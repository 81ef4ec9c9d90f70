"""Prolific as a `Marketplace`: recruitment and pay on Prolific, the work on the campaign's own task site.

The HITs themselves are posted, unpaid, on the in-process built-in marketplace (an MTurk-API
`Marketplace`, `inner`), whose worker site is the task site; Prolific participants reach it through the
door (`campaign.market.prolific_site`). This adapter is also a `Studies` marketplace: for each HIT type
(one per stage; a ranking stage's batches share theirs) a Prolific study whose places cover the posted
work (`places_wanted`), opened by `refill` once the ledger has reserved them, and stopped when the
stage is complete. Returned, timed-out and rejected submissions free their place on Prolific itself
(the reference, S9), so places are raised only for work that no place covers any more. Single HITs are
decided on the task site as for `local`; once every HIT of a participant's submission is decided, the
bundle's verdict (`bundle_verdict`: approved, or rejected only by Prolific's rules, failed attention
checks or exceptionally fast completion, `campaign.prolific.checks`) is sent to Prolific (`settle`, also run as a sweep every pass, which
repairs a decision a crash cut off). Bonuses go to the submission that did the assignment, through
Prolific's bonus batches. Every remote Prolific call goes through `ProlificStudies`, which journals
intent before the call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from decimal import Decimal
from typing import Any

from sqlmodel import col, func, select

from campaign.crash import crash_point
from campaign.market.door_remote import RemoteDoor
from campaign.market.prolific_site import ProlificDoor
from campaign.marketplaces.base import (
    AdditionalAssignments,
    AlreadyDone,
    Capabilities,
    HitRequest,
    HitType,
    MarketError,
    Marketplace,
    RemoteAssignment,
    RemoteHit,
    SetupRefused,
    StudyCost,
    StudySubmission,
    TransientError,
    WorkerGroups,
    work_key,
)
from campaign.money import Cost
from campaign.prolific.account import Account, AccountMismatch, percent, read_account, study_cost_minor
from campaign.prolific.checks import (
    REJECTED_EVENT,
    CheckCount,
    checks_needed,
    expected_seconds,
    seconds_taken,
    too_quick,
)
from campaign.prolific.client import ProlificError
from campaign.prolific.filters import FilterChoiceError
from campaign.prolific.gate import StudySeat, site_worker_id
from campaign.prolific.studies import FINAL, BonusPending, ProlificStudies
from campaign.prolific.study import (
    ProlificConfig,
    bonus_cost,
    filters,
    place_cost,
    reward_per_submission,
    study_body,
    work_pay,
)
from campaign.prolific.verdict import Verdict, bundle_verdict, no_work_verdict, places_needed
from campaign.state import LedgerKind, SubmissionStatus
from campaign.store import HitRow, LedgerRow, ProlificHitTypeRow, ProlificPostedRow, ProlificVerdictRow, Store

TAKES_PLACE = ("RESERVED", "ACTIVE", "AWAITING REVIEW", "APPROVED", "PARTIALLY APPROVED", "SCREENED OUT")
WORKING = ("RESERVED", "ACTIVE")
RETURN_REASON = "Didn't finish the study"  # one of the reasons Prolific's own interface offers
GONE = ("RETURNED", "TIMED-OUT")  # left without finishing: what they held goes back to others
PENDING = ("RESERVED", "ACTIVE", "AWAITING REVIEW", "PROCESSING")
STATUS = {"APPROVED": SubmissionStatus.APPROVED, "PARTIALLY APPROVED": SubmissionStatus.APPROVED, "REJECTED": SubmissionStatus.REJECTED, "RETURNED": SubmissionStatus.RETURNED,
          "TIMED-OUT": SubmissionStatus.TIMED_OUT, "SCREENED OUT": SubmissionStatus.RETURNED}


log = logging.getLogger(__name__)


@contextmanager
def _as_market_errors() -> Iterator[None]:
    """Prolific's errors in the interface's terms: throttling, server trouble and a lost connection may
    succeed on a later tick; anything else is this call's final answer."""
    try:
        yield
    except AccountMismatch as exc:  # the spec's workspace, project or currency does not fit the account
        raise SetupRefused(str(exc), "ProlificAccount") from None
    except FilterChoiceError as exc:  # the spec names a country or language Prolific has no choice for
        raise MarketError(str(exc), "ProlificFilterChoice") from None
    except ProlificError as exc:
        if exc.status == 0 or exc.status == 429 or exc.status >= 500:
            raise TransientError(str(exc), f"Prolific{exc.status}", throttled=exc.status == 429) from None
        raise MarketError(str(exc), f"Prolific{exc.status}") from None


class ProlificFees:
    """Prolific's fee schedule: the HITs on the task site cost nothing; a place costs its reward plus
    fee plus VAT on the fee (`place_cost`), a bonus the same rule on its amount.

    With `account` (the marketplace's reader of the Prolific account, `campaign.prolific.account`) the
    rates are the account's, and a place is priced by Prolific's study cost calculator; the spec's rates
    (`cfg`) are only the assumption for an offline estimate."""

    def __init__(self, cfg: ProlificConfig, account: Callable[[], Account] | None = None) -> None:
        self.cfg = cfg
        self._account = account

    def _rates(self) -> tuple[ProlificConfig, Decimal | None]:
        if self._account is None:
            return self.cfg, None
        acct = self._account()
        return acct.config(self.cfg), acct.place_total

    @property
    def currency(self) -> str:
        return self.cfg.currency

    def hit_reserve(self, reward: Decimal, assignments: int) -> Decimal:
        return Decimal("0.00")

    def assignment(self, reward: Decimal, assignments: int) -> Cost:
        return Cost(Decimal("0.00"), Decimal("0.00"))

    def bonus(self, amount: Decimal) -> Cost:
        cfg, _ = self._rates()
        total = bonus_cost(cfg, Decimal(amount))
        return Cost(total, total - Decimal(amount))

    def place(self) -> Cost:
        cfg, priced = self._rates()
        total = place_cost(cfg) if priced is None else priced
        return Cost(total, total - reward_per_submission(cfg))


class ProlificMarketplace:
    def __init__(self, inner: Marketplace, studies: ProlificStudies, door: ProlificDoor | RemoteDoor, cfg: ProlificConfig,
                 store: Store, campaign: str, *, name: str = "prolific-local",
                 checks: Callable[[Sequence[str]], CheckCount] | None = None) -> None:
        """What the adapter remembers (HITs posted per study, HIT types, decisions noted) is `campaign`'s,
        in `store`, beside its journal (`studies`). `checks` counts the attention checks among assignments'
        answers (`campaign.prolific.check_reader.store_checks`); without it a submission has none."""
        self.inner = inner
        self.studies = studies
        self.door = door
        self.cfg = cfg
        self.store = store
        self.campaign = campaign
        self.name = name
        self.capabilities: Capabilities = inner.capabilities
        self.fees = ProlificFees(cfg, self.account)
        self._account: Account | None = None
        self._lock = threading.RLock()
        self._filters: list[dict[str, object]] | None = None
        self._eligible: dict[str, int | None] = {}
        self._checks = checks
        self._times: dict[str, dict[str, float]] = {}  # study -> completed submission -> seconds taken (from listings)

    def close(self) -> None:
        """Nothing to release: the store is its opener's."""

    # -- the account: workspace, project, currency, fee and VAT as Prolific has them -----------------------------
    def account(self) -> Account:
        """The Prolific account's figures for this campaign (`campaign.prolific.account.read_account`), read
        once per process before anything is created; `SetupRefused` when the spec's workspace, project or
        currency does not fit it (nothing cached: read again after `campaign resume`). Where the account's
        fee, VAT or place price differ from the spec's assumption, a warning event says so; the service's
        figures are used."""
        with self._lock:
            if self._account is None:
                with _as_market_errors():
                    acct = read_account(self.studies.api, self.cfg)
                for note in acct.notes:
                    self.store.event(self.campaign, "prolific_account", note, level="warning")
                self.store.event(self.campaign, "prolific_account",
                                 f"studies go to workspace {acct.workspace_id} ({acct.workspace_title!r}), project "
                                 f"{acct.project_id}; paid in {acct.currency}; the account's fee {percent(acct.fee_rate)}% "
                                 f"and VAT {percent(acct.vat_rate)}% on it; a place costs {acct.place_total}")
                self._account = acct
            return self._account

    # -- posting: HITs on the task site, places on Prolific ------------------------------------------------------
    def create_hit_type(self, hit_type: HitType, *, sandbox: bool) -> str:
        from campaign.spec import Qualifications

        # Paid by Prolific, targeted by the study's filters: on the task site the HITs are free and open to
        # whoever the door admits.
        open_type = replace(hit_type, reward=Decimal("0.00"), qualifications=Qualifications(locales=()))
        type_id = self.inner.create_hit_type(open_type, sandbox=sandbox)
        with self._lock, self.store.session() as s:
            if s.exec(select(ProlificHitTypeRow.id).where(ProlificHitTypeRow.campaign == self.campaign,
                                                          ProlificHitTypeRow.type_id == type_id)).first() is None:
                s.add(ProlificHitTypeRow(campaign=self.campaign, type_id=type_id, title=hit_type.title,
                                         description=hit_type.description))
        return type_id

    def create_hit(self, type_id: str, request: HitRequest) -> RemoteHit:
        hit = self.inner.create_hit(type_id, request)
        with self._lock, self.store.session() as s:
            if s.exec(select(ProlificPostedRow.id).where(ProlificPostedRow.campaign == self.campaign,
                                                         ProlificPostedRow.hit_id == hit.hit_id)).first() is None:
                s.add(ProlificPostedRow(campaign=self.campaign, hit_id=hit.hit_id, type_id=type_id,
                                        assignments=request.max_assignments))
        return hit

    def add_assignments(self, hit_id: str, count: int, token: str) -> None:
        """`AdditionalAssignments`: `count` more slots on the task site's HIT (once per `token`: a repeat
        raises `AlreadyDone` there), then the HIT's slot count as the study sees it, so `places_wanted`
        asks for the places they need (reserved in the ledger and opened by the `places` step). The count
        is copied from the store's HIT row, which the replace step raised before this call: a repeat after
        a crash between the two writes sets the same number again, never one more."""
        inner = self.inner
        if not isinstance(inner, AdditionalAssignments):
            raise MarketError("the task site cannot add slots to a HIT")
        repeated: AlreadyDone | None = None
        try:
            inner.add_assignments(hit_id, count, token)
        except AlreadyDone as exc:
            repeated = exc
        crash_point("prolific.add_assignments.after_call")
        with self._lock, self.store.session() as s:
            slots = s.exec(select(HitRow.assignments).where(HitRow.campaign == self.campaign, HitRow.hit_id == hit_id)).first()
            posted = s.exec(select(ProlificPostedRow).where(ProlificPostedRow.campaign == self.campaign,
                                                            ProlificPostedRow.hit_id == hit_id)).first()
            if posted is not None and slots is not None and int(slots) > posted.assignments:
                posted.assignments = int(slots)
                s.add(posted)
        if repeated is not None:
            raise repeated

    # -- studies: places, decisions, stopping (`campaign.marketplaces.base.Studies`) -------------------------------
    def place_cost(self) -> Cost:
        with _as_market_errors():
            return self.fees.place()

    def _places_wanted(self) -> dict[str, int]:
        """Per HIT type: the places taken now plus enough new ones for the posted work nobody holds.

        Work is held by a submission that submitted or holds an assignment (unless it left), or that is
        still working and has room left in its bundle; the rest needs ceil(rest / bundle) new places. A
        stopped study (its stage complete) gets none: raising its places would make it active again. The
        account is read first (`account`): a campaign the account cannot run opens nothing."""
        self.account()
        with self.store.session() as s:
            totals = {str(t): int(n) for t, n in s.exec(
                select(ProlificPostedRow.type_id, func.sum(ProlificPostedRow.assignments))
                .where(ProlificPostedRow.campaign == self.campaign).group_by(col(ProlificPostedRow.type_id))).all()}
        out: dict[str, int] = {}
        bundle = self.cfg.bundle
        for type_id, total in totals.items():
            row = self.studies.study(type_id)
            if row is None or row.study_id is None:
                out[type_id] = places_needed(int(total), bundle)
                continue
            if self.studies.stopping(type_id):  # its stage is complete: more places would only reopen it on Prolific
                out[type_id] = int(row.places)
                continue
            raw = self.studies.submissions_of(row.study_id)
            subs = {s["id"]: str(s.get("status")) for s in raw}
            served = self.door.served_counts(row.study_id)
            taking = sum(1 for st in subs.values() if st in TAKES_PLACE)
            held = 0
            for sub, st in subs.items():
                done, open_ = served.get(sub, (0, 0))
                held += done + (0 if st in GONE else open_)
                if st in WORKING:
                    held += max(0, bundle - done - open_)
            want = taking + places_needed(max(0, int(total) - held), bundle)
            if want > int(row.places) and not self._servable(row.study_id, {str(s.get("participant_id", "")) for s in raw}):
                want = int(row.places)  # work nobody who may come could take: a new place would only be returned
            out[type_id] = max(int(row.places), want)
        return out

    def _servable(self, study_id: str, participants: set[str]) -> bool:
        """Someone eligible could take free work of the study: a participant it has not seen yet (fewer
        took part than its filters reach, `POST /eligibility-count/`, read once per study), or one who
        took part and may still be given a free HIT (`ProlificDoor.could_serve`)."""
        reach = self._reach(study_id)
        if reach is None or len(participants) < reach:
            return True
        return self.door.could_serve(study_id, participants)

    def _reach(self, study_id: str) -> int | None:
        """How many participants the study's filters reach (None: not known, new ones assumed)."""
        if study_id not in self._eligible:
            try:
                self._eligible[study_id] = self.studies.api.eligible_count(
                    filters(self.cfg, self.cfg.block_list, self._catalogue()), self.account().workspace_id)
            except ProlificError as exc:
                log.info("eligible count of study %s not read (%s): new participants assumed", study_id, exc)
                self._eligible[study_id] = None
        return self._eligible[study_id]

    def unservable(self) -> list[str]:
        """The HITs of every study (not stopped) whose free work nobody may take: nobody working on the study
        holds a task of it now (a task held may still come back to the pool), everyone its filters reach has
        taken part, and none of them may be given a free HIT of it (`ProlificDoor.could_serve`: the door
        keeps a participant from a HIT they were given, one sharing an item with one they saw in the
        stage, and one whose HIT type shuts them out), leaving out those whose submission to it was
        rejected (no work, failed checks: a `no_work` participant, never seen on the task site, would
        count as able to take anything, and keeps starting places and completing them empty). With the thousands Prolific's filters reach this is rare; with
        a small pool (a simulated crowd of 30) a ranking stage's last HIT could otherwise wait out its
        lifetime, days, for answers that cannot come."""
        with _as_market_errors():
            return self._unservable()

    def _unservable(self) -> list[str]:
        out: list[str] = []
        for key, study_id in self.studies.study_ids():
            if self.studies.stopping(key):
                continue
            raw = self.studies.submissions_of(study_id)
            served = self.door.served_counts(study_id)
            if not raw or any(str(s.get("status")) in WORKING and served.get(str(s["id"]), (0, 0))[1] for s in raw):
                continue  # a task held now may come back to the pool
            took_part = {str(s.get("participant_id", "")) for s in raw}
            reach = self._reach(study_id)
            if reach is None or len(took_part) < reach:
                continue  # someone it reaches has not come yet
            # someone whose submission the study rejected (no work, failed checks) is not counted on
            rejected = {str(s.get("participant_id", "")) for s in raw if str(s.get("status")) == "REJECTED"}
            if self.door.could_serve(study_id, took_part - rejected):
                continue
            with self.store.session() as s:
                out += [str(h) for h in s.exec(select(ProlificPostedRow.hit_id).where(
                    ProlificPostedRow.campaign == self.campaign, ProlificPostedRow.type_id == key)).all()]
        return out

    def _refill(self, key: str, places: int) -> int:
        with self.store.session() as s:
            known = s.exec(select(ProlificHitTypeRow).where(ProlificHitTypeRow.campaign == self.campaign,
                                                            ProlificHitTypeRow.type_id == key)).first()
        title, description = (known.title, known.description) if known is not None else ("Annotation", "Annotation task")

        def body(internal_name: str, code: str, n: int) -> dict[str, object]:
            return study_body(self.cfg, name=title, description=description, internal_name=internal_name, places=n,
                              completion_code=code, seat=key, project_id=self.account().project_id,
                              block_group_id=self.cfg.block_list,
                              catalogue=self._catalogue())
        study_id = self.studies.ensure_study(key, places, body)
        row = self.studies.study(key)
        assert row is not None
        self.door.add_seat(StudySeat(study_id, key, self.cfg.bundle, row.completion_code, self.cfg.completion_url),
                           stage=key)
        return self.studies.raise_places(key, places)

    def _catalogue(self) -> list[dict[str, object]] | None:
        """Prolific's filter catalogue, read once, when the spec names countries or languages."""
        if not (self.cfg.countries or self.cfg.languages):
            return None
        if self._filters is None:
            self._filters = self.studies.api.filters()
        return self._filters

    def _stop(self, key: str) -> bool:
        self.studies.stop(key)
        row = self.studies.study(key)
        if row is None or row.study_id is None:
            return True
        def over(subs: list[dict[str, object]]) -> bool:
            return not any(s.get("status") in PENDING or (s.get("status") in GONE and not self._work_settled(str(s["id"])))
                           for s in subs)
        # the last listing may say "wait" (a hook brings the change); "over" is final, so it is asked afresh,
        # and a fresh listing that differs from the last one is settled (charged, paid) by a pass first
        last = self.studies.submissions_of(row.study_id)
        if not over(last):
            return False
        now = self.studies.submissions_of(row.study_id, fresh=True)
        return over(now) and {s.get("id"): s.get("status") for s in now} == {s.get("id"): s.get("status") for s in last}

    def study_submissions(self) -> list[StudySubmission]:
        """Every submission with its status; a returned or timed-out one with the pay its used work is
        owed (`work_owed`)."""
        out = []
        for key, study_id in self.studies.study_ids():
            listed = self.studies.submissions_of(study_id)
            self._note_times(study_id, listed)
            for s in listed:
                sub, status = str(s["id"]), str(s.get("status"))
                work = self.work_owed(sub) if status in GONE else None
                out.append(StudySubmission(key, sub, site_worker_id(str(s.get("participant_id", ""))),
                                           STATUS.get(status, SubmissionStatus.PENDING), work))
        return out

    def _decisions(self, aids: Sequence[str]) -> dict[str, str]:
        """assignment -> "approve" | "reject", for those of `aids` the quality policy decided."""
        return {a: decision for a, (decision, _) in self._verdicts(aids).items()}

    def _verdicts(self, aids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """assignment -> (decision, reason) noted for those of `aids` decided on the task site."""
        if not aids:
            return {}
        with self.store.session() as s:
            rows = s.exec(select(ProlificVerdictRow).where(ProlificVerdictRow.campaign == self.campaign,
                                                           col(ProlificVerdictRow.assignment_id).in_(list(aids)))).all()
        return {r.assignment_id: (r.decision, r.reason) for r in rows}

    def _note_verdict(self, assignment_id: str, decision: str, reason: str) -> None:
        """Note a HIT's decision once (a first note stands)."""
        with self._lock, self.store.session() as s:
            if s.exec(select(ProlificVerdictRow.id).where(ProlificVerdictRow.campaign == self.campaign,
                                                          ProlificVerdictRow.assignment_id == assignment_id)).first() is None:
                s.add(ProlificVerdictRow(campaign=self.campaign, assignment_id=assignment_id, decision=decision, reason=reason))

    def work_owed(self, submission_id: str) -> Decimal | None:
        """What a submission that was not completed (returned, timed out) is owed for its HITs the quality
        policy approved: `work_pay`, the reward's share per HIT. None while a HIT of it is undecided or
        when nothing is owed."""
        aids = self.door.assignments_of(submission_id)
        if not aids:
            return None
        rows = self._decisions(aids)
        if any(a not in rows for a in aids):
            return None
        amount = work_pay(self.cfg, sum(1 for a in aids if rows[a] == "approve"))
        return amount if amount > 0 else None

    def pay_work(self, key: str, submission_id: str, amount: Decimal) -> Cost:
        """A bonus to the submission, journaled under its id so it is paid once."""
        row = self.studies.study(key)
        if row is None or row.study_id is None:
            raise MarketError(f"no study for {key}", "NoStudy")
        with _as_market_errors():
            try:
                self.studies.bonus(work_key(submission_id), str(row.study_id), submission_id, amount)
            except BonusPending as exc:
                raise TransientError(str(exc), "ProlificBonusPending") from None
        return self.fees.bonus(amount)

    def resolve_uncertain(self, key: str, paid: bool) -> None:
        self.studies.resolve_uncertain(key, paid)

    def _work_settled(self, submission_id: str) -> bool:
        """A returned or timed-out submission owes nothing more: no HIT of it undecided, and its approved
        HITs paid (`pay_work`)."""
        aids = self.door.assignments_of(submission_id)
        if not aids:
            return True
        if any(a not in self._decisions(aids) for a in aids):
            return False
        return self.work_owed(submission_id) is None or self.studies.bonus_paid(work_key(submission_id))

    def find_by_annotation(self, annotation: str) -> RemoteHit | None:
        return self.inner.find_by_annotation(annotation)

    def get_hit(self, hit_id: str) -> RemoteHit:
        return self.inner.get_hit(hit_id)

    def expire_hit(self, hit_id: str, at: float) -> None:
        self.inner.expire_hit(hit_id, at)

    def extend_hit(self, hit_id: str, until: float) -> None:
        self.inner.extend_hit(hit_id, until)

    # -- work ---------------------------------------------------------------------------------------------------
    def submissions(self, hit_id: str) -> list[RemoteAssignment]:
        return self.inner.submissions(hit_id)

    def reviewable_hits(self, type_ids: Sequence[str] = ()) -> list[str]:
        return self.inner.reviewable_hits(type_ids)

    def get_assignment(self, assignment_id: str) -> RemoteAssignment:
        return self.inner.get_assignment(assignment_id)

    def answer_fields(self, answer: str) -> list[tuple[str, str]]:
        return self.inner.answer_fields(answer)

    def approve(self, assignment_id: str, feedback: str | None = None) -> None:
        self.inner.approve(assignment_id, feedback)
        self._decided(assignment_id, "approve", "")

    def approve_many(self, assignment_ids: Sequence[str]) -> None:
        for aid in assignment_ids:
            self.approve(aid)

    def reject(self, assignment_id: str, feedback: str) -> None:
        self.inner.reject(assignment_id, feedback)
        self._decided(assignment_id, "reject", feedback)

    def _decided(self, assignment_id: str, decision: str, reason: str) -> None:
        self._note_verdict(assignment_id, decision, reason)
        found = self.door.submission_of(assignment_id)
        if found is not None:
            crash_point("prolific.before_verdict")  # decided on the task site, not yet on Prolific: the sweep repairs it
            try:
                self.send_verdicts(found[0])
            except ProlificError as exc:  # decided on the task site; `settle`'s sweep sends it later
                log.warning("Prolific decision on %s deferred to the next sweep: %s", found[0], exc)

    def _settle(self) -> list[StudySubmission]:
        """The sweep: every verdict that is due (a crash between the decision on the task site and the
        call to Prolific is repaired here), every submission completed with no work rejected, then every
        submission of every study with its status; the tasks a returned or timed-out one still held are
        given back to the marketplace (`ProlificDoor.release`)."""
        self.account()  # the charges booked from here on are at the account's rates
        self.send_verdicts()
        self.reject_no_work()
        subs = self.study_submissions()
        for sub in subs:
            if sub.status in (SubmissionStatus.RETURNED, SubmissionStatus.TIMED_OUT):
                self.door.release(sub.submission_id)  # what they held goes back to others now, not at its deadline
        return subs

    def reject_no_work(self) -> list[str]:
        """Reject (NO_CODE) every submission awaiting review that recorded no answer on the task site.

        Once AWAITING REVIEW a submission can record nothing more (the door confirms ACTIVE before every
        answer), so a submission the door holds no answer for never will: it was completed with a leaked
        or guessed code. Undecided, Prolific would approve and charge it after its auto-approval delay.
        The door is asked after Prolific, so an answer recorded while the place was still active is seen.
        Returns the submissions rejected now."""
        out: list[str] = []
        done = self.studies.decided()
        for _key, study_id in self.studies.study_ids():
            for s in self.studies.submissions_of(study_id):
                sub = str(s["id"])
                if str(s.get("status")) != "AWAITING REVIEW" or sub in done or self.door.assignments_of(sub):
                    continue
                if self._decide(sub, no_work_verdict()) == "REJECTED":
                    out.append(sub)
        return out

    def _decide(self, submission_id: str, verdict: Verdict) -> str:
        """Send a verdict (once: the journal); a rejection made now is an event with its category and its one
        message, what the participant reads (the pilot's summary counts them by category)."""
        before = submission_id in self.studies.decided()
        status = self.studies.decide(submission_id, verdict)
        if status == "REJECTED" and not before and verdict.action == "reject":
            self.store.event(self.campaign, REJECTED_EVENT, f"{verdict.category}: submission {submission_id} rejected on "
                             f"Prolific: {verdict.message}", subject=submission_id, data={"category": verdict.category})
        return status

    def send_verdicts(self, submission_id: str | None = None) -> dict[str, str]:
        """Send the verdict of every submission whose HITs are all decided (or just `submission_id`); a
        submission not completed on Prolific yet is left for a later call. Returns submission -> status."""
        out: dict[str, str] = {}
        done = self.studies.decided()
        subs = [submission_id] if submission_id else [s for s, _ in self.door.submissions() if s not in done]
        for sub in subs:
            aids = self.door.assignments_of(sub)
            if self._short_completion(sub, aids):
                continue
            rows = self._verdicts(aids)
            for a in aids:
                if a not in rows:  # decided on the task site but killed before noted here: its status says
                    status = self.inner.get_assignment(a).status
                    if status in (SubmissionStatus.APPROVED, SubmissionStatus.REJECTED):
                        rows[a] = ("approve" if status == SubmissionStatus.APPROVED else "reject", "" if status == SubmissionStatus.APPROVED
                                   else "rejected by the quality policy on the task site")
                        self._note_verdict(a, *rows[a])
            decisions = [rows[a][0] if a in rows else None for a in aids]
            verdict = bundle_verdict(decisions)
            if verdict.action != "wait" and sub not in done:  # (a decided one: the journal answers, nothing is sent)
                checks = self._checks(aids) if self._checks is not None and aids else CheckCount()
                found = self.door.submission_of(aids[0]) if aids else None
                quick = self._quick(sub, found[1]) if found is not None and checks.failed < checks_needed(self.cfg.estimated_minutes) else None
                verdict = bundle_verdict(decisions, checks, checks_needed(self.cfg.estimated_minutes), quick)
            if verdict.action != "wait":
                out[sub] = self._decide(sub, verdict)
        return out

    def _note_times(self, study_id: str, listed: Sequence[dict[str, object]]) -> None:
        """Remember how long each completed submission of a study took (its listing has the times)."""
        times = self._times.setdefault(study_id, {})
        for s in listed:
            took = seconds_taken(s.get("started_at"), s.get("completed_at"))
            if took is not None:
                times[str(s["id"])] = took

    def _quick(self, submission_id: str, study_id: str) -> tuple[float, float, Decimal] | None:
        """(seconds taken, expected seconds, share) when the submission was exceptionally fast
        (`campaign.prolific.checks`), else None. The study's times come from the sweep's listings; a
        submission not in them yet is read once."""
        share = self.cfg.too_quick
        if not share:
            return None
        times = self._times.setdefault(study_id, {})
        if submission_id not in times:
            self._note_times(study_id, [self.studies.api.submission(submission_id)])
        took = times.get(submission_id)
        if took is None:
            return None  # not completed: nothing to judge (and nothing is sent before it is)
        expected = expected_seconds(self.cfg.estimated_minutes, times.values())
        return (took, expected, Decimal(share)) if too_quick(took, expected, share) else None

    def submission_facts(self) -> list[dict[str, object]]:
        """Per submission of every study: status, seconds taken (None unless completed), attention checks
        seen and failed, and the rejection category when rejected; for the pilot's summary."""
        out: list[dict[str, object]] = []
        for _key, study_id in self.studies.study_ids():
            listed = self.studies.api.submissions(study_id)
            self._note_times(study_id, listed)
            for s in listed:
                sub = str(s["id"])
                aids = self.door.assignments_of(sub)
                checks = self._checks(aids) if self._checks is not None and aids else CheckCount()
                out.append({"id": sub, "status": str(s.get("status")), "hits": len(aids),
                            "seconds": seconds_taken(s.get("started_at"), s.get("completed_at")),
                            "checks_seen": checks.seen, "checks_failed": checks.failed})
        return out

    def _listed(self, study_id: str, submission_id: str) -> dict[str, Any] | None:
        """The submission as the study's last listing has it, when webhooks keep that listing current (a
        hook about it makes the next listing fresh); None without webhooks (one GET is cheaper than a
        listing) or when the listing does not have it yet."""
        if self.studies.watch is None:
            return None
        return next((s for s in self.studies.submissions_of(study_id) if str(s.get("id")) == submission_id), None)

    def _short_completion(self, submission_id: str, aids: Sequence[str]) -> bool:
        """True while a submission that did fewer HITs than its bundle must not be approved yet.

        The task site gives the completion code only after a whole bundle; a shorter one is asked to
        return the place and paid per HIT (`work_owed`). A submission completed on Prolific with fewer
        HITs used a code it was not given (it is the same for everyone and leaks): approving it would pay
        a whole bundle's reward for part of one. It is asked to return (Prolific messages the
        participant; once returned, its HITs are paid as work). One who has not returned it within the
        study's maximum time is approved at the reward after all, because Prolific's rules allow no
        rejection for work that was done, and blocked from the campaign's studies, so it happens to
        nobody twice (an event says so). A submission still working is left alone (nothing to decide);
        one returned or timed out goes on to `decide`, which records it as final."""
        found = self.door.submission_of(aids[0]) if aids else None
        seat = self.door.seat(found[1]) if found else None
        if seat is None or len(aids) >= seat.bundle:
            return False
        sub = self._listed(found[1], submission_id) if found else None
        if sub is None:
            sub = self.studies.api.submission(submission_id)
        status = str(sub.get("status"))
        if status in FINAL:
            return False
        if status != "AWAITING REVIEW":
            return True  # mid-bundle: nothing to decide yet
        key = f"prolific.return_requested:{submission_id}"
        asked = self.store.get_kv(self.campaign, key)
        now = self.studies.now()
        if asked is None:
            self.studies.api.request_return(submission_id, [RETURN_REASON])
            self.store.set_kv(self.campaign, key, repr(now))
            self.store.event(self.campaign, "prolific_return_requested",
                             f"submission {submission_id} was completed after {len(aids)} of {seat.bundle} tasks with a "
                             "completion code the task site did not give it: asked to return it (its tasks are then paid "
                             "per task)", level="warning", subject=submission_id)
            return True
        # the study's maximum time (Prolific's default when the spec sets none: ten times the estimate)
        minutes = self.cfg.maximum_minutes or 10 * self.cfg.estimated_minutes
        if now - float(asked) < 60.0 * minutes:
            return True
        worker = site_worker_id(str(sub.get("participant") or sub.get("participant_id") or ""))
        self.block(worker, "completed a study with a code it was not given and did not return it when asked")
        self.store.event(self.campaign, "prolific_short_approved",
                         f"submission {submission_id} ({len(aids)} of {seat.bundle} tasks) was not returned within "
                         f"{minutes} minutes of the request: approved at the full reward (Prolific's "
                         f"rules allow no rejection for work done) and {worker} blocked", level="warning", subject=submission_id)
        return False

    # -- money and workers ----------------------------------------------------------------------------------------
    def places_wanted(self) -> dict[str, int]:
        with _as_market_errors():
            return self._places_wanted()

    def refill(self, key: str, places: int) -> int:
        with _as_market_errors():
            return self._refill(key, places)

    def stop(self, key: str) -> bool:
        try:
            with _as_market_errors():
                return self._stop(key)
        finally:
            self.studies.note_usage()  # a study's last listing is asked here

    def settle(self) -> list[StudySubmission]:
        try:
            with _as_market_errors():
                return self._settle()
        finally:
            self.studies.note_usage()  # what the pass cost Prolific, for `status --json` and the end of `run`

    def bonus(self, worker_id: str, assignment_id: str, amount: Decimal, reason: str, token: str) -> None:
        found = self.door.submission_of(assignment_id)
        if found is None:
            raise MarketError(f"assignment {assignment_id} was not done through Prolific: no submission to pay a bonus to",
                              "NotAProlificSubmission")
        with _as_market_errors():
            try:
                self.studies.bonus(token, found[1], found[0], amount)
            except BonusPending as exc:  # may have been paid, not visible yet: asked again next pass, never paid twice
                raise TransientError(str(exc), "ProlificBonusPending") from None
            # BonusUncertain is no marketplace answer: it goes up as it is, and the bonus is held for the
            # researcher ("may have been sent"), neither paid again nor released

    def block(self, worker_id: str, reason: str) -> None:
        """Blocked on the task site (the door has no task for them any more) and, when the spec names a
        participant group as `prolific.block_list`, added to it: every study of the campaign carries that
        group as a block-list filter, so Prolific stops showing them the studies (adding a member twice
        changes nothing, so a retry after a crash is harmless)."""
        self.inner.block(worker_id, reason)
        if self.cfg.block_list and worker_id.startswith("AP"):
            with _as_market_errors():
                self.studies.api.add_to_group(self.cfg.block_list, [worker_id[2:].lower()])

    # -- worker groups (`campaign.marketplaces.base.WorkerGroups`): on the task site ---------------------------
    def worker_group(self, name: str) -> str:
        """A group of the task site's workers (participants are workers there): a HIT type that shuts it out
        is never offered to them, so the door has no task of it for them and asks them to return the place."""
        return self._site_groups().worker_group(name)

    def add_to_group(self, group_id: str, worker_id: str) -> None:
        self._site_groups().add_to_group(group_id, worker_id)

    def _site_groups(self) -> WorkerGroups:
        inner = self.inner
        if not isinstance(inner, WorkerGroups):
            raise MarketError("the task site keeps no worker groups", "NoWorkerGroups")
        return inner

    def balance(self) -> Decimal:
        return self.inner.balance()

    # -- reconciliation: the ledger against what Prolific charged (`campaign.marketplaces.base.ReconcilesCost`) --
    def booked(self, key: str) -> Decimal:
        """What the ledger booked as spent for study `key`: its places and work bonuses (charged under the
        study) and the quality bonuses paid to its submissions (found through the door)."""
        row = self.studies.study(key)
        with self.store.session() as s:
            rows = s.exec(select(LedgerRow.kind, LedgerRow.amount, LedgerRow.hit_key, LedgerRow.assignment_id)
                          .where(LedgerRow.campaign == self.campaign,
                                 col(LedgerRow.kind).in_((LedgerKind.CHARGE, LedgerKind.BONUS_CHARGE)))).all()
        total = Decimal("0.00")
        for kind, amount, hit_key, aid in rows:
            if kind == LedgerKind.CHARGE:
                mine = hit_key == f"study:{key}"
            else:
                found = self.door.submission_of(aid) if aid and row is not None else None
                mine = found is not None and row is not None and found[1] == row.study_id
            if mine:
                total += Decimal(amount)
        return total

    def study_cost(self, key: str) -> StudyCost | None:
        """The ledger's figure for study `key` beside what Prolific says it charged (`GET
        /studies/{id}/cost/`: rewards and bonuses with their fees and tax); None without a study."""
        row = self.studies.study(key)
        if row is None or row.study_id is None:
            return None
        booked = self.booked(key)
        with _as_market_errors():
            charged = Decimal(study_cost_minor(self.studies.api.study_cost(str(row.study_id)))) / 100
        return StudyCost(key, str(row.study_id), booked, charged)
