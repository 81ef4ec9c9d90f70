"""The marketplace interface the daemon's steps call: everything they need from a crowd marketplace,
in the campaign's own words (HITs, assignments, bonuses, blocks), never in one API's operation names.

MTurk's model is the reference: a HIT type (title, reward, duration, qualifications) and HITs of that
type, each with `max_assignments` slots filled by different workers. A marketplace that recruits people
into studies (Prolific) implements the same calls over the campaign's own task site, where its
participants do the HITs, and adds the `Studies` capability: one study per HIT type, whose paid places
carry the money, so its HITs cost nothing themselves. Idempotency the server does not give (no request
tokens) is made by the implementation: reconcile by the HIT's `annotation` (e.g. a study's internal
name) before creating, and look up earlier bonuses before paying one again.

Errors: every implementation raises only `MarketError` and its subclasses, so steps decide on the
kind of failure (retry next tick, already done, wrong state) without knowing the API behind it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from campaign.money import MTURK_FEES, Cost

if TYPE_CHECKING:
    from campaign.spec import Qualifications


class MarketError(Exception):
    """A marketplace call failed for good (as far as this call goes): `code` is the API's error code."""

    def __init__(self, message: str, code: str = "", detail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.detail = detail  # a second code where the API has one (MTurk's TurkErrorCode)
        self.message = message

    def __str__(self) -> str:
        head = " ".join(p for p in (self.code, self.detail) if p)
        return f"{head}: {self.message}" if head else self.message


def work_key(submission_id: str) -> str:
    """A study submission's pay for its used work (`Studies.pay_work`): its journal key on the marketplace
    and the name of its held row when the payment is uncertain."""
    return f"work:{submission_id}"


class PaymentUncertain(Exception):
    """A pay call may have gone through unrecorded and the service has not shown the payment within the
    time it was watched for: the program neither pays it again nor releases its money; the researcher
    checks on the service and says which it was (`campaign decide NAME ROW paid|unpaid`). Deliberately
    not a MarketError: no step may treat it as an answer and retry."""


class TransientError(MarketError):
    """Throttled, unavailable or a broken connection: the call may or may not have happened; try again
    later with the same idempotency token."""

    def __init__(self, message: str, code: str = "", detail: str = "", throttled: bool = False) -> None:
        super().__init__(message, code, detail)
        self.throttled = throttled


class AlreadyDone(MarketError):
    """The same request (same token, same extension) was carried out before: nothing more to do."""


class SetupRefused(MarketError):
    """The marketplace's account cannot run the campaign as its spec says (a workspace that does not
    exist, one paying in another currency): the campaign is blocked, with this message, before anything
    is created; `campaign resume` after the spec or the account is fixed."""


class InvalidState(MarketError):
    """The object is not in a state that allows the call (e.g. approving an already approved assignment)."""


@dataclass(frozen=True)
class HitType:
    """What every HIT of a stage shares; `create_hit_type` is idempotent on these values."""

    title: str
    description: str
    reward: Decimal
    duration: int  # seconds a worker has once they accept
    auto_approval_delay: int  # seconds until the marketplace approves undecided work by itself
    keywords: str
    qualifications: Qualifications  # translated by the implementation to its own filters
    # ids from `WorkerGroups.worker_group`: members of these groups may not take the HITs (a stage's repeat)
    excluded_groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class HitRequest:
    """One HIT to create. `token` makes the call idempotent where the server keeps tokens; `annotation`
    is unique to the draft and is how a HIT is found again (`find_by_annotation`)."""

    html: str  # the task page (a form posting to MTurk's externalSubmit; see campaign.tasks)
    max_assignments: int
    lifetime: int  # seconds the HIT stays available
    annotation: str
    token: str


@dataclass(frozen=True)
class RemoteHit:
    hit_id: str
    annotation: str | None = None
    type_id: str | None = None
    expires_at: float | None = None  # epoch seconds
    closed: bool = False  # no longer takes workers (expired, or every slot submitted)
    pending: int = 0  # slots accepted and being worked on now
    reconciled: bool = False  # found already posted (an earlier attempt's HIT), not created by this call


@dataclass(frozen=True)
class RemoteAssignment:
    assignment_id: str
    worker_id: str
    hit_id: str
    status: str  # a SubmissionStatus: submitted, approved or rejected
    answer: str  # the raw answer as the marketplace gives it (stored verbatim; see `answer_fields`)
    accept_time: float | None = None
    submit_time: float | None = None


@dataclass
class Capabilities:
    """What the steps may rely on."""

    token_lifetime: float | None = None  # seconds a `HitRequest.token` is remembered; None: not at all
    bulk_approve: bool = False
    # MTurk's system qualifications (Masters, ...) by their sandbox ids: every MTurk-API marketplace but
    # MTurk production, whose ids differ (`create_hit_type(sandbox=...)`)
    sandbox_qualifications: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Marketplace(Protocol):
    """The requester side of a marketplace. Every method is one remote action (or a short series) and
    raises only `MarketError`s. What an implementation must remember between calls belongs in the
    campaign store, so that a campaign resumes from the store alone (Prolific's journal is in its
    `prolific_*` tables)."""

    name: str  # "local", "mturk-sandbox", "mturk", "prolific", ...
    capabilities: Capabilities

    # -- posting ---------------------------------------------------------------------------------------
    def create_hit_type(self, hit_type: HitType, *, sandbox: bool) -> str:
        """An id for the shared settings of a stage's HITs (idempotent: same values, same id)."""
        ...

    def create_hit(self, type_id: str, request: HitRequest) -> RemoteHit:
        """Create a HIT, or find the one an earlier attempt with the same token/annotation created
        (then `reconciled` is True). Never creates two HITs for one request."""
        ...

    def find_by_annotation(self, annotation: str) -> RemoteHit | None: ...

    def get_hit(self, hit_id: str) -> RemoteHit: ...

    def expire_hit(self, hit_id: str, at: float) -> None:
        """Stop new work on the HIT from `at` (epoch seconds; the past expires it now)."""
        ...

    def extend_hit(self, hit_id: str, until: float) -> None:
        """Move the HIT's expiry to `until`; `AlreadyDone` when this exact extension was made before."""
        ...

    # -- work ------------------------------------------------------------------------------------------
    def submissions(self, hit_id: str) -> list[RemoteAssignment]:
        """Every submitted, approved or rejected assignment of the HIT (all pages)."""
        ...

    def reviewable_hits(self, type_ids: Sequence[str] = ()) -> list[str]:
        """HITs with work waiting for a decision (or done), by id; with `type_ids`, only the HITs of those
        HIT types (MTurk: ListReviewableHITs with HITTypeId, one listing per type)."""
        ...

    def get_assignment(self, assignment_id: str) -> RemoteAssignment: ...

    def answer_fields(self, answer: str) -> list[tuple[str, str]]:
        """The form fields (name, value) in a stored raw answer, in posting order; a `ValueError` (never
        another exception) for an answer that cannot be read, which collect keeps as invalid."""
        ...

    def approve(self, assignment_id: str, feedback: str | None = None) -> None: ...

    def approve_many(self, assignment_ids: Sequence[str]) -> None:
        """Approve several at once where the marketplace can (else one by one)."""
        ...

    def reject(self, assignment_id: str, feedback: str) -> None: ...

    # -- money and workers -----------------------------------------------------------------------------
    def bonus(self, worker_id: str, assignment_id: str, amount: Decimal, reason: str, token: str) -> None:
        """Pay a bonus once per `token`; `AlreadyDone` when it was paid before."""
        ...

    def block(self, worker_id: str, reason: str) -> None: ...

    def balance(self) -> Decimal: ...


@runtime_checkable
class WorkerGroups(Protocol):
    """Optional: named groups of workers that a HIT type can shut out (`HitType.excluded_groups`), so a
    HIT can go to workers who did not do an earlier one. On MTurk a group is a requester qualification
    type (no test, not requestable) granted to its members, shut out by a `DoesNotExist` requirement; on
    Prolific it would be a participant block list. Both calls are idempotent."""

    def worker_group(self, name: str) -> str:
        """The id of the group called `name` (unique per requester), created the first time."""
        ...

    def add_to_group(self, group_id: str, worker_id: str) -> None: ...


@runtime_checkable
class AdditionalAssignments(Protocol):
    """Optional: more slots on a posted HIT (MTurk: CreateAdditionalAssignmentsForHIT), so an answer that
    was refused, rejected or never given can be asked for again from another worker. A marketplace
    without it does not implement it. On Prolific (`ProlificMarketplace`) the task site's HIT gets the
    slots and the study the places they need (`Studies.places_wanted`), booked like the first ones.

    `token` is deterministic per (HIT, round), so a call repeated after a crash adds nothing: the
    second one raises `AlreadyDone`. MTurk refuses to take a HIT created with fewer than 10 assignments
    to 10 or more (`MarketError`), and a disposed HIT (`InvalidState`)."""

    def add_assignments(self, hit_id: str, count: int, token: str) -> None: ...


class FeeSchedule(Protocol):
    """What the marketplace charges, as the ledger books it. A marketplace without a `fees` attribute
    is paid by MTurk's rules (`campaign.money.MTurkFees`)."""

    def hit_reserve(self, reward: Decimal, assignments: int) -> Decimal:
        """Reserved when a HIT is posted (0: HITs are not what is paid for)."""
        ...

    def assignment(self, reward: Decimal, assignments: int) -> Cost: ...

    def bonus(self, amount: Decimal) -> Cost: ...

    @property
    def currency(self) -> str:
        """What the amounts are in (ISO code), for the messages that show them."""
        ...


@runtime_checkable
class ReviewMarking(Protocol):
    """Optional: a marketplace whose list of reviewable HITs a HIT can leave once all its work is stored
    (MTurk: UpdateHITReviewStatus to Reviewing), so the collect step stops listing it."""

    def mark_reviewing(self, hit_id: str) -> None: ...


@runtime_checkable
class CountsRequests(Protocol):
    """Optional: a marketplace that counts the requests it sent (the daemon's run statistics), in all and
    per operation."""

    requests: int
    requests_by_op: dict[str, int]


@runtime_checkable
class OwnFees(Protocol):
    """Optional: a marketplace that charges by its own `FeeSchedule` (without it: MTurk's)."""

    fees: FeeSchedule


def fees_of(market: object) -> FeeSchedule:
    return market.fees if isinstance(market, OwnFees) else MTURK_FEES


@dataclass(frozen=True)
class StudySubmission:
    """One person's paid unit of work on a study marketplace (a Prolific submission: a bundle of HITs)."""

    key: str  # the study's key (the HIT type it recruits for)
    submission_id: str
    worker_id: str
    status: str  # a SubmissionStatus: pending (working or awaiting review), approved, rejected, returned or timed-out
    work: Decimal | None = None  # a returned or timed-out submission's used work, owed (paid by `Studies.pay_work`)


@runtime_checkable
class Studies(Protocol):
    """Optional: a marketplace that recruits people into studies with paid places (Prolific), one study
    per HIT type, while the HITs themselves cost nothing. The `studies` pipeline steps
    (`campaign.steps.studies`) drive it, the ledger reserving a place before it is opened and charging
    it when its submission is approved."""

    def place_cost(self) -> Cost:
        """What one place costs when its submission is approved (reward, fee, tax)."""
        ...

    def places_wanted(self) -> dict[str, int]:
        """Per study key, the places the work posted so far needs (never fewer than opened before)."""
        ...

    def refill(self, key: str, places: int) -> int:
        """Create and publish the study of `key` if needed and raise its places to `places` (never
        lowered); returns its places now. Idempotent."""
        ...

    def settle(self) -> list[StudySubmission]:
        """Send every decision that is due (and repair any an interrupted call left undone); returns
        every submission with its status, for the ledger."""
        ...

    def stop(self, key: str) -> bool:
        """Take no more people into the study; True once no submission of it can still be paid."""
        ...

    def pay_work(self, key: str, submission_id: str, amount: Decimal) -> Cost:
        """Pay a returned or timed-out submission its used work (`StudySubmission.work`), once however
        often it is called; returns what it costs with fees. TransientError while a payment whose call
        may have gone through does not show yet; PaymentUncertain once it has not shown in time."""
        ...

    def resolve_uncertain(self, key: str, paid: bool) -> None:
        """The researcher's word on an uncertain payment (`PaymentUncertain`) of journal key `key`: paid
        (recorded as paid, nothing sent) or not (the next pay call sends it)."""
        ...


@runtime_checkable
class UnservableWork(Protocol):
    """Optional: a marketplace that can tell when posted work will never reach anyone (Prolific: a study
    every eligible participant has taken part in, none of them working on it now, and none of them may
    be given its free HITs), so the campaign stops waiting for it (`campaign.steps.studies.give_up`)
    instead of holding the HITs open to the end of their lifetime."""

    def unservable(self) -> list[str]:
        """The posted HITs (marketplace ids) whose free slots nobody who may still come could take."""
        ...


@dataclass(frozen=True)
class StudyCost:
    """One study's money both ways: what the ledger booked as spent for it and what the service says it
    charged (rewards and bonuses with their fees and tax), both in major units."""

    key: str
    study_id: str
    booked: Decimal
    charged: Decimal

    @property
    def matches(self) -> bool:
        return self.booked == self.charged


@runtime_checkable
class ReconcilesCost(Protocol):
    """Optional, for `Studies` marketplaces: a study's booked spend against what the service charged."""

    def booked(self, key: str) -> Decimal:
        """What the campaign's ledger booked as spent for study `key` (no remote call)."""
        ...

    def study_cost(self, key: str) -> StudyCost | None:
        """Both figures, the service's read now; None while the study does not exist."""
        ...


def approve_each(market: Marketplace, assignment_ids: Iterable[str]) -> None:
    """`approve_many` for marketplaces without a bulk call."""
    for aid in assignment_ids:
        market.approve(aid)
