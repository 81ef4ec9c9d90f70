"""The task-kind interface: everything that differs between Likert, ranking, nugget (or any new) HITs.

The daemon's steps, the simulated crowd and the exports never ask "which kind is this?"; they look the
kind up in the registry (`campaign.tasks.get(stage.kind)`) and call it. A kind is pure: it never
touches the store or the marketplace. What it needs from the store comes in as plain values or through
the read-only `StageData` view, so a kind can be tested without a database.

To add a kind: subclass `TaskKind` in its own module, give it a `name`, implement `plan`, `page` and
`parse` (the rest has defaults that fit a per-item numeric rating), and `campaign.tasks.register()` an
instance. A kind with its own stage options sets `stage_type` to its own subclass of `campaign.stage.Stage`,
which the spec then reads its stages into. Its simulated answer takes the worker and the page's form as
the protocols of `campaign.simulation`: a kind never imports the simulated crowd.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from campaign.stage import Stage
from campaign.tasks.base import HitDraft, InvalidAnswer, Judgment, ShownItem, summarise

if TYPE_CHECKING:
    import numpy as np

    from campaign.quality.evidence import Label, TrapResult
    from campaign.simulation import PageForm, SimulatedWorker
    from campaign.spec import Campaign

EXPORT_COLUMNS = ("rank", "item", "score", "n", "sd", "text")
#: the columns a kind fills in each row of the answers export (`TaskKind.answer_labels`): the label
#: itself, and for a span the token offsets of its first and last word within the item (a sentence)
ANSWER_LABEL_COLUMNS = ("label", "first", "last")


@dataclass(frozen=True)
class PlanItem:
    """An input item as planning sees it: its key, its document (nugget windows) and its text."""

    key: str
    doc: str | None = None
    text: str = ""


@dataclass(frozen=True, slots=True)  # one per counted label: hundreds of thousands at the seed's scale
class CountedJudgment:
    """One judgment that counts for the scores: of an approved assignment, not excluded by quality control."""

    item_key: str
    value: float
    extra: Mapping[str, Any]
    assignment_id: str
    worker_id: str
    hit_key: str


@dataclass(frozen=True, slots=True)  # hundreds of thousands at once at the seed's scale
class ReviewedJudgment:
    """One judgment quality control looks at: every valid answer so far, decided or not (rejected work
    stays evidence). `shown` is how many items the HIT showed."""

    item_key: str
    value: float
    worker_id: str
    assignment_id: str
    hit_key: str
    shown: int
    extra: Mapping[str, Any] = field(default_factory=dict)  # the judgment's task-specific detail (e.g. spans)


@dataclass(frozen=True)
class BatchInput:
    """What a batch-planned kind knows when it plans the next batch (all read from the store)."""

    campaign: str
    items: Sequence[str]  # the stage's candidates (e.g. a shortlist), fixed once the stage starts
    answers: Sequence[Sequence[Judgment]]  # every counted answer of the stage so far, one list per assignment, in a fixed order
    state: Any  # what the kind returned as `BatchPlan.state` last time (None before the first batch)
    batch: int  # number of the batch to plan (0 for the first)
    seed: int


@dataclass
class BatchPlan:
    """The next batch: HIT item groups, or `stop` (why the stage is complete) when there is none."""

    groups: list[tuple[str, ...]] = field(default_factory=list)
    state: Any = None  # JSON-able; handed back in the next BatchInput
    stop: str | None = None  # set: the stage is complete; "" completes it without an event
    stop_level: str = "info"
    progress: Mapping[str, Any] | None = None  # facts about the previous batch (kept under "<kind>_batch:<stage>:<n>")
    note: str = ""  # what the batch holds, for the event


@dataclass
class Export:
    """What a finished stage writes: score rows in `columns`, extra files and worker facts."""

    rows: list[dict]
    columns: tuple[str, ...] = EXPORT_COLUMNS
    files: dict[str, str] = field(default_factory=dict)  # file name -> text, written beside scores.csv
    competence: dict[str, float] = field(default_factory=dict)  # joins each worker's evidence
    summary: str = ""  # appended to the "finished" event


class StageData(Protocol):
    """Read-only access to what the store holds about a campaign, for exports and batch planning."""

    @property
    def campaign(self) -> Campaign: ...

    @property
    def seed(self) -> int: ...

    def counted(self, stage: str) -> list[CountedJudgment]:
        """Judgments of approved, not excluded assignments, ordered by item key then assignment id."""
        ...

    def texts(self) -> dict[str, str]:
        """Item key -> text of every item (traps included)."""
        ...

    def items(self) -> list[str]:
        """The campaign's input items (no traps), in input order."""
        ...

    def scores(self, stage: str) -> list[dict]:
        """The stage's per-item summary (its kind's `aggregate`), with a `text` per row."""
        ...

    def candidates(self, stage: str) -> list[str]:
        """The candidates a batch-planned stage fixed when it started."""
        ...

    def agreement(self, stage: str) -> dict[str, float]:
        """Each worker's agreement with the others in the stage (worker-rest r, `campaign.quality.evidence`)
        as the stage's latest review found it; a worker it could not measure is absent."""
        ...


def answers_by_assignment(counted: Sequence[CountedJudgment]) -> list[list[Judgment]]:
    """Counted judgments grouped into answers, in a fixed order (HIT, then worker): what a replay of
    a stage's answers needs to be the same on every run."""
    return [js for _, js in answers_with_workers(counted)]


def answers_with_workers(counted: Sequence[CountedJudgment]) -> list[tuple[str, list[Judgment]]]:
    """`answers_by_assignment` with each answer's worker beside it (for a kind that weighs answers by who
    gave them)."""
    by_assignment: dict[str, tuple[tuple[str, str], list[Judgment]]] = {}
    for j in counted:
        by_assignment.setdefault(j.assignment_id, ((j.hit_key, j.worker_id), []))[1].append(
            Judgment(item_key=j.item_key, value=j.value, extra=j.extra))
    return [(key[1], js) for key, js in sorted(by_assignment.values(), key=lambda v: v[0])]


class TaskKind(ABC):
    """One task kind. Subclasses set `name` and implement `plan`, `page` and `parse`."""

    name: ClassVar[str]
    #: the kind's stage type: the spec reads a stage of this kind into it (its own fields, defaults and rules)
    stage_type: ClassVar[type[Stage]] = Stage
    #: planned batch by batch from earlier answers (`plan_batch`) rather than all at once (`plan`)
    batch_planned: ClassVar[bool] = False
    #: quality control reads this kind's evidence (`evidence`) and holds, rejects and blocks on it
    policed: ClassVar[bool] = False
    #: among policed stages, the first whose kind says so is the campaign's primary one: its facts head
    #: each worker's record (`campaign workers`) and its review decides bonuses
    primary_evidence: ClassVar[bool] = False
    #: the kind's HITs carry no traps, so agreement with the other workers is the only evidence against
    #: random answers: a worker called on it alone is excluded beyond the relative cap
    #: (`campaign.quality.review.PolicyConfig.low_agreement_absolute`)
    low_agreement_absolute: ClassVar[bool] = False
    #: an answer quality control leaves out (approved and paid, excluded) is asked for again like a
    #: rejected one (`campaign.steps.replace`): the kind needs its full number of answers per HIT
    #: (nuggets: several workers on the same span), where a mean of fewer answers would do
    replace_excluded: ClassVar[bool] = False
    #: a rejected answer is asked for again (`campaign.steps.replace`): the kind needs its full number of
    #: answers per HIT. Likert means and ranking comparisons do with fewer, and adding slots to their HITs
    #: changes which workers reach later HITs and batches (ranking spam then escaped rejection in a test)
    replace_refused: ClassVar[bool] = False
    #: HIT pages name their kind in the form's `data-task`; the one kind whose page predates that (and
    #: stays byte-identical) says so here, so the simulated crowd knows an untagged page is its
    untagged_page: ClassVar[bool] = False

    # -- planning --------------------------------------------------------------------------------------
    @abstractmethod
    def plan(self, stage: Stage, items: Sequence[PlanItem], traps: Sequence[str], seed: int) -> list[HitDraft]:
        """All HIT drafts of a stage, deterministic in (items, seed); `traps` are the stage's trap keys."""

    def candidates(self, stage: Stage, data: StageData) -> list[str]:
        """Batch-planned kinds: the items the stage works on, chosen once when it starts (e.g. the top of
        an earlier stage's scores); the step stores them so later changes cannot reshuffle the stage."""
        raise NotImplementedError(f"task kind {self.name!r} is not batch-planned")

    def plan_batch(self, stage: Stage, inp: BatchInput) -> BatchPlan:
        """Batch-planned kinds: the next batch from every counted answer so far."""
        raise NotImplementedError(f"task kind {self.name!r} is not batch-planned")

    def cut(self, stage: Stage, campaign_stages: Sequence[Stage]) -> tuple[Stage, int] | None:
        """Batch-planned kinds whose candidates are the top of an earlier stage's scores: that stage and
        the rank the candidates are cut at (items tied with that rank join them, so the stage's size,
        and with it its cost, follows the scores); None when the kind takes no cut. The cost estimate
        reads it to price the ties it cannot see (`campaign.estimate.tie_distribution`)."""
        return None

    def pairs_at_most(self, stage: Stage, n_candidates: int) -> int | None:
        """Batch-planned kinds that spend a budget of comparisons: how many pairs the stage plans at most
        over `n_candidates` items. The cost estimate replays a long stage's first batches only and
        extrapolates the rest from it (`campaign.estimate.stage_batches`); None: replayed to the end."""
        return None

    def score_levels(self, stage: Stage) -> int | None:
        """How many distinct scores an item of this stage can get (a mean of `assignments` ratings on a
        fixed scale takes few: ties are common); None when scores are practically continuous."""
        return None

    # -- the HIT ---------------------------------------------------------------------------------------
    @abstractmethod
    def page(self, stage: Stage, items: Sequence[ShownItem], topic: str) -> str:
        """The HIT's HTML page (a form posting to MTurk's externalSubmit; the marketplace wraps it)."""

    @abstractmethod
    def parse(self, stage: Stage, fields: Sequence[tuple[str, str]], items: Sequence[ShownItem]) -> list[Judgment]:
        """Validate a submitted form against the HIT's own items: judgments, or `InvalidAnswer`."""

    # -- scores ----------------------------------------------------------------------------------------
    def aggregate(self, values_by_item: Mapping[str, Sequence[float]]) -> list[dict]:
        """Per-item summary (rank, item, score, n, sd) from counted values; traps never reach it."""
        return summarise(values_by_item)

    def export(self, stage: Stage, data: StageData) -> Export:
        """What the campaign writes when this kind's stage is its last one."""
        return Export(rows=data.scores(stage.name))

    # -- the answers export ----------------------------------------------------------------------------
    #: keys of a judgment's `extra` that hold the worker's own words (not a label): `campaign forget`
    #: removes them with the rest of a person's answers' personal data
    free_text_extra: ClassVar[tuple[str, ...]] = ()

    def answer_labels(self, value: float, extra: Mapping[str, Any]) -> list[dict[str, Any]]:
        """One stored judgment (a worker's answer about one item) as rows of the answers export, each a
        dict over `ANSWER_LABEL_COLUMNS` (a missing column is empty). At least one row, so every item an
        answer covered is in the export; more than one when a judgment holds several labels (spans).
        Every row's `label` is what `aggregate` reads for this item from this answer, so a file's kept
        rows give the kind's scores back."""
        return [{"label": int(value) if float(value).is_integer() else value}]

    # -- quality control -------------------------------------------------------------------------------
    def evidence(self, stage: Stage, rows: Sequence[ReviewedJudgment]) -> tuple[list[Label], list[TrapResult]] | None:
        """Labels and trap results for the review policy; None when this kind is not policed.

        Row by row: what a row gives must not depend on the other rows passed with it (`shown` carries
        what a row needs of its assignment), and a label's item must come from its row's `item_key` (its
        labels are read back by item when a let-go item gets another: `RunningEvidence.retire`). Quality
        control passes only the rows stored since its last run and keeps what it was given
        (`campaign.steps.quality_pass.running_evidence`)."""
        return None

    # -- the simulated crowd ---------------------------------------------------------------------------
    def simulate(self, worker: SimulatedWorker, form: PageForm, truth_of: Callable[[str], float],
                 rng: np.random.Generator) -> list[tuple[str, str]]:
        """A simulated worker's form fields for a HIT page (the assignmentId field is added by the crowd)."""
        raise NotImplementedError(f"the simulated crowd cannot answer {self.name!r} HITs")


__all__ = [
    "ANSWER_LABEL_COLUMNS", "EXPORT_COLUMNS", "BatchInput", "BatchPlan", "CountedJudgment", "Export", "InvalidAnswer", "PlanItem",
    "ReviewedJudgment", "StageData", "TaskKind", "answers_by_assignment",
]
