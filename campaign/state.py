"""The store's vocabulary: every status a row can be in and every key of the per-campaign key-value table.

One module names them so that a typo is a type error, not a row no query ever finds again. The values
are the strings the store has always held (a `StrEnum` member *is* its string), so stored data, JSON
output and scores files do not change; a test (`tests/test_state_literals.py`) fails on any status or
key literal written elsewhere in `campaign/`.

A leaf: it imports nothing of `campaign`, so the store, the ledger, the steps and the read side all
take their words from here.
"""

from __future__ import annotations

from enum import StrEnum


class CampaignStatus(StrEnum):
    """`CampaignRow.status`. A campaign runs until it is finished or cancelled; `paused` stops posting
    and review, `cancelling` expires what is posted before `cancelled`, `budget_exhausted` waits for a
    larger budget (`campaign budget --set`)."""

    RUNNING = "running"
    PAUSED = "paused"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"
    FINISHED = "finished"
    BUDGET_EXHAUSTED = "budget_exhausted"
    BLOCKED = "blocked"  # a marketplace refused a change for good: nothing runs until `campaign resume`


# the daemon's passes work on these
ACTIVE = frozenset({CampaignStatus.RUNNING, CampaignStatus.PAUSED, CampaignStatus.CANCELLING})
TICKED = ACTIVE | {CampaignStatus.BUDGET_EXHAUSTED}  # a campaign out of money still takes a raised budget
DONE = frozenset({CampaignStatus.FINISHED, CampaignStatus.CANCELLED})  # no answer is still to come
STOPPED = DONE | {CampaignStatus.BUDGET_EXHAUSTED}  # where `campaign run` stops (without --forever)


class HitStatus(StrEnum):
    """`HitRow.status`: draft -> posting -> posted -> closed, or failed (refused for good) or cancelled
    (a draft of a cancelled campaign), or held (its posting failed and waits for the operator). `posting`
    is written before the marketplace call, so a restart knows the call may have happened."""

    DRAFT = "draft"
    POSTING = "posting"
    POSTED = "posted"
    CLOSED = "closed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    HELD = "held"


class AssignmentStatus(StrEnum):
    """`AssignmentRow.status`: submitted -> approving -> approved, or submitted -> rejecting -> rejected;
    `held` when a step failed on it and the operator decides. The -ing states are written before the
    marketplace call."""

    SUBMITTED = "submitted"
    APPROVING = "approving"
    APPROVED = "approved"
    REJECTING = "rejecting"
    REJECTED = "rejected"
    HELD = "held"


UNDECIDED = (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVING, AssignmentStatus.REJECTING)
DECIDED = (AssignmentStatus.APPROVED, AssignmentStatus.REJECTED)
DECIDING = (AssignmentStatus.APPROVING, AssignmentStatus.REJECTING)


class SubmissionStatus(StrEnum):
    """A marketplace's word on one answer or paid submission (`Submission.status`, `StudySubmission.status`),
    mapped from MTurk's or Prolific's own statuses by their adapters."""

    PENDING = "pending"  # working, or awaiting review
    SUBMITTED = "submitted"
    APPROVED = "approved"
    REJECTED = "rejected"
    RETURNED = "returned"
    TIMED_OUT = "timed-out"


class HeldStatus(StrEnum):
    """`HeldRow.status`: held -> settled."""

    HELD = "held"
    SETTLED = "settled"


class HeldKind(StrEnum):
    """`HeldRow.row_kind`: what a held row stands for."""

    ASSIGNMENT = "assignment"  # a submitted answer (its status is `held` too)
    HIT = "hit"  # a draft whose posting failed (its status is `held`)
    BONUS = "bonus"  # a bonus reserved and not sent
    WORK = "work"  # a returned or timed-out submission's pay for its used work, whose payment is uncertain


class Decision(StrEnum):
    """`HeldRow.decision`: the operator's, written by `campaign decide`."""

    APPROVE = "approve"
    REJECT = "reject"
    DROP = "drop"
    PAID = "paid"  # an uncertain payment: the researcher saw it on the service (booked, not sent again)
    UNPAID = "unpaid"  # an uncertain payment: the researcher saw it did not arrive (sent now)


class WorkerStanding(StrEnum):
    """How a worker stands in a campaign, as the views name it (`WorkerRow.excluded` / `.blocked`)."""

    OK = "ok"
    EXCLUDED = "excluded"
    BLOCKED = "blocked"


class BonusState(StrEnum):
    """The value under `Keys.bonus(worker)`: sending is written before the marketplace call."""

    HELD = "held"
    SENDING = "sending"
    PAID = "paid"


class ProlificStudyState(StrEnum):
    """`ProlificStudyRow.state`: what the adapter has done to a study; each is written before the next call."""

    INTENT = "intent"  # about to be created (its internal name finds it again on Prolific)
    CREATED = "created"  # created, not yet published
    PUBLISHED = "published"
    STOPPING = "stopping"  # no more places from here; stopped once Prolific lets it
    STOPPED = "stopped"


class ProlificDecisionState(StrEnum):
    """`ProlificDecisionRow.state`: a decision on a submission is sent while it is `intent`."""

    INTENT = "intent"
    DONE = "done"  # final on Prolific


class ProlificBonusState(StrEnum):
    """`ProlificBonusRow.state`: a bonus batch is created, then paid once; a `paying` bonus (the pay call
    may have gone through) is reconciled with Prolific and never paid again."""

    INTENT = "intent"
    CREATED = "created"  # the batch exists: creating one pays nothing
    PAYING = "paying"
    PAID = "paid"
    UNCERTAIN = "uncertain"  # maybe paid, not visible on Prolific in time: the researcher decides


class RepeatState(StrEnum):
    """The value under `Keys.repeat(stage)`: whether the stage's repeated HITs are planned."""

    PLANNED = "planned"
    SKIPPED = "skipped"


class ReplaceState(StrEnum):
    """`state` in the JSON under `Keys.replace(hit)`: a replacement round's progress."""

    ASKING = "asking"
    ASKED = "asked"
    REFUSED = "refused"


class LedgerKind(StrEnum):
    """`LedgerRow.kind`: reserve (+reserved), charge (-reserved, +spent), release (-reserved), and the same
    three for bonuses."""

    RESERVE = "reserve"
    CHARGE = "charge"
    RELEASE = "release"
    BONUS_RESERVE = "bonus_reserve"
    BONUS_CHARGE = "bonus_charge"
    BONUS_RELEASE = "bonus_release"


CHARGES = (LedgerKind.CHARGE, LedgerKind.BONUS_CHARGE)


class HitKeys:
    """Prefixes of `HitRow.hit_key` that mark a HIT's role."""

    REPEAT = "repeat:"  # a repeat of a first-pass HIT, for the retest reliability


class Keys:
    """The keys of the per-campaign key-value table (`KVRow.key`). A fixed key is a constant; a key about
    one stage, HIT, worker or study is built by a function, and `PREFIXES` lists those functions' prefixes
    for readers that select a family of keys."""

    BUDGET_SET = "budget_set"  # the operator's new budget, written by `campaign budget --set`
    BUDGET_BLOCKED = "budget_blocked"  # why posting is blocked; "" once cleared
    EXTEND_HOURS = "extend_hours"  # hours `campaign extend` asked for, not applied yet
    EXTEND_CURSOR = "extend_cursor"  # "HOURS ID": every open HIT up to row ID has had HOURS of them applied
    COLLECT_CURSOR = "collect_cursor"
    SHARED_BLOCKS = "shared_blocks"  # JSON list of workers blocked across campaigns
    ALERTS_ACTIVE = "alerts:active"
    HEARTBEAT = "daemon_heartbeat"
    PSEUDONYM_SECRET = "pseudonym_secret"
    # "1" once the campaign's Prolific journal files of a release before schema 0004 were read into the store
    PROLIFIC_FILES_IMPORTED = "prolific_files_imported"
    SHUT_OUT_GROUP = "shut_out_group"  # the worker group later stages' HIT types shut out (`steps.shut_out`)
    SHUT_OUT = "shut_out"  # JSON list of the workers added to that group

    STAGE_COMPLETE = "stage_complete:"
    BATCH_STATE = "batch_state:"
    SHORTLIST = "shortlist:"
    REPEAT = "repeat:"
    REPEAT_GROUP = "repeat_group:"
    REVIEW = "review:"
    REPLACE = "replace:"
    BONUS = "bonus:"
    STUDY_OVER = "study_over:"
    STUDY_PLACES = "study_places:"
    STUDY_COST = "study_cost:"  # a finished study's last reconciliation: JSON {study, booked, charged}
    STUDY_COST_WAIT = "study_cost_wait:"  # when a finished study was first found unreconciled (the run's clock)
    BATCH_PROGRESS = "_batch:"  # after the kind's name: "<kind>_batch:<stage>:<batch>"
    SHUT_OUT_STAGE = "shut_out_stage:"

    @staticmethod
    def stage_complete(stage: str) -> str:
        """"1" once the stage's planner said it is complete."""
        return f"{Keys.STAGE_COMPLETE}{stage}"

    @staticmethod
    def batch_state(stage: str) -> str:
        """The stage's planner state between batches (JSON)."""
        return f"{Keys.BATCH_STATE}{stage}"

    @staticmethod
    def shortlist(stage: str) -> str:
        """The items the stage takes from the one before it (JSON list)."""
        return f"{Keys.SHORTLIST}{stage}"

    @staticmethod
    def repeat(stage: str) -> str:
        """A `RepeatState`."""
        return f"{Keys.REPEAT}{stage}"

    @staticmethod
    def repeat_group(hit_key: str) -> str:
        return f"{Keys.REPEAT_GROUP}{hit_key}"

    @staticmethod
    def shut_out_stage(stage: str) -> str:
        """The group id the stage's HIT types shut out (`steps.shut_out`), "" for none; fixed at its first post."""
        return f"{Keys.SHUT_OUT_STAGE}{stage}"

    @staticmethod
    def review(stage: str) -> str:
        """The stage's last review result (JSON)."""
        return f"{Keys.REVIEW}{stage}"

    @staticmethod
    def replace(hit_key: str) -> str:
        """The HIT's replacement round (JSON with a `ReplaceState`)."""
        return f"{Keys.REPLACE}{hit_key}"

    @staticmethod
    def bonus(worker: str) -> str:
        """A `BonusState`."""
        return f"{Keys.BONUS}{worker}"

    @staticmethod
    def study_over(study: str) -> str:
        return f"{Keys.STUDY_OVER}{study}"

    @staticmethod
    def study_cost(study: str) -> str:
        return f"{Keys.STUDY_COST}{study}"

    @staticmethod
    def study_cost_wait(study: str) -> str:
        return f"{Keys.STUDY_COST_WAIT}{study}"

    @staticmethod
    def study_places(study: str) -> str:
        return f"{Keys.STUDY_PLACES}{study}"

    @staticmethod
    def batch_progress(kind: str, stage: str, batch: int) -> str:
        """Facts about one finished batch of a stage (JSON), for the report."""
        return f"{kind}{Keys.BATCH_PROGRESS}{stage}:{batch:04d}"

    @staticmethod
    def batch_progress_prefix(kind: str, stage: str | None = None) -> str:
        return f"{kind}{Keys.BATCH_PROGRESS}" + (f"{stage}:" if stage is not None else "")
