"""The Likert task (seed 000 §4.1): five propositions per HIT rated from "Extremely important" (5) to
"Not at all important" (1); importance is the mean rating with its count and standard deviation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from campaign.rng import rng_for
from campaign.stage import Stage
from campaign.tasks.base import (
    TRAP_PREFIX,
    HitDraft,
    InvalidAnswer,
    Judgment,
    ShownItem,
    answer_fields,
    html_question,
    render_page,
    single,
    summarise,
)
from campaign.tasks.kind import PlanItem, ReviewedJudgment, TaskKind

if TYPE_CHECKING:
    import numpy as np

    from campaign.quality.evidence import Label, TrapResult
    from campaign.simulation import PageForm, SimulatedWorker

KIND = "likert"
SCALE = (
    (5, "Extremely important"),
    (4, "Very important"),
    (3, "Moderately important"),
    (2, "Slightly important"),
    (1, "Not at all important"),
)
OPTIONAL_FIELDS = frozenset({"comment"})


def plan(item_keys: Sequence[str], stage: str, items_per_hit: int, seed: int, trap_keys: Sequence[str] = (),
         trap_share: float = 0.0) -> list[HitDraft]:
    """Group items at random into HITs of `items_per_hit`; pure and deterministic in (items, seed).

    The last group is topped up with other items (they get a few extra ratings) so every HIT looks the
    same to workers. A `trap_share` of HITs gets one trap item added at a random position, so every
    real item keeps the ratings planned for it.
    """
    keys = sorted(item_keys)
    if not keys:
        return []
    rng = rng_for("likert-plan", stage, seed)
    order = [keys[i] for i in rng.permutation(len(keys))]
    size = min(items_per_hit, len(keys))
    groups = [order[i:i + size] for i in range(0, len(order), size)]
    if len(groups[-1]) < size:
        last = groups[-1]
        fill = [k for k in order if k not in last]
        groups[-1] = last + fill[: size - len(last)]
    drafts = []
    n_traps = int(round(trap_share * len(groups))) if trap_keys else 0
    trap_hits = set(int(i) for i in rng.choice(len(groups), size=n_traps, replace=False)) if n_traps else set()
    for i, group in enumerate(groups):
        if i in trap_hits:
            pos = int(rng.integers(0, size))
            group = list(group)
            group.insert(pos, trap_keys[int(rng.integers(0, len(trap_keys)))])
        drafts.append(HitDraft(hit_key=f"{stage}-{i:05d}", stage=stage, item_keys=tuple(group)))
    return drafts


def page(items: Sequence[ShownItem], topic: str, title: str, instructions: str | None = None,
         template: str | None = None) -> str:
    """The HIT's page: one radio group per item (the stage's own instructions and template if given)."""
    return render_page("likert.html", template, instructions, title=title, topic=topic, items=items, scale=SCALE)


def render(items: Sequence[ShownItem], topic: str, title: str) -> str:
    """The HIT's HTMLQuestion XML."""
    return html_question(page(items, topic, title))


def parse(fields: Sequence[tuple[str, str]], item_keys: Sequence[str]) -> list[Judgment]:
    """Validate a submitted form against the HIT's own items; one judgment per item, or InvalidAnswer."""
    got = answer_fields(fields)
    expected = {f"rating-{i}" for i in range(len(item_keys))}
    unknown = sorted(set(got) - expected - OPTIONAL_FIELDS)
    if unknown:
        raise InvalidAnswer(f"unexpected fields: {', '.join(unknown[:5])}")
    out = []
    for i, key in enumerate(item_keys):
        raw = single(got, f"rating-{i}").strip()
        if raw not in {"1", "2", "3", "4", "5"}:
            raise InvalidAnswer(f"rating-{i} must be 1..5, got {raw[:20]!r}")
        out.append(Judgment(item_key=key, value=float(raw)))
    return out


def aggregate(values_by_item: Mapping[str, Sequence[float]]) -> list[dict]:
    """Importance = mean rating (5..1), with its count and standard deviation."""
    return summarise(values_by_item)


@dataclass(frozen=True, kw_only=True)
class LikertStage(Stage):
    """Seed 000 §4.1: 5 propositions per Likert HIT, 5 workers, $0.06."""

    needs_input = "propositions"

    kind: str = "likert"
    items_per_hit: int = 5
    assignments: int = 5
    reward: Decimal = Decimal("0.06")
    title: str = "How important is this statement for the topic?"
    description: str = "Rate how important each of five short statements is for a summary of a topic."


class LikertKind(TaskKind):
    """Ratings on a 5-point scale; the stage quality control reads first (numeric labels, shared items)."""

    name = KIND
    stage_type = LikertStage
    primary_evidence = True
    untagged_page = True  # likert.html has no data-task (kept byte-identical: page content seeds the crowd)
    policed = True

    def plan(self, stage: Stage, items: Sequence[PlanItem], traps: Sequence[str], seed: int) -> list[HitDraft]:
        return plan([i.key for i in items], stage.name, stage.items_per_hit, seed, traps, stage.traps.share)

    def page(self, stage: Stage, items: Sequence[ShownItem], topic: str) -> str:
        return page(items, topic, stage.title, stage.instructions, stage.template)

    def parse(self, stage: Stage, fields: Sequence[tuple[str, str]], items: Sequence[ShownItem]) -> list[Judgment]:
        return parse(fields, [i.key for i in items])

    def aggregate(self, values_by_item: Mapping[str, Sequence[float]]) -> list[dict]:
        return aggregate(values_by_item)

    def score_levels(self, stage: Stage) -> int | None:
        """A mean of `assignments` ratings on the 5-point scale: (5 - 1) x assignments + 1 values (21 for
        5 ratings), so items tie often; fewer ratings (work left out) give a coarser grid of their own."""
        points = [v for v, _ in SCALE]
        return (max(points) - min(points)) * stage.assignments + 1

    def answer_labels(self, value: float, extra: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The rating, 5 (extremely important) to 1 (not at all), as an integer."""
        return [{"label": int(value)}]

    def evidence(self, stage: Stage, rows: Sequence[ReviewedJudgment]) -> tuple[list[Label], list[TrapResult]]:
        """A rating per item; a trap passes when rated at most `traps.max_rating`."""
        from campaign.quality.evidence import Label, TrapResult

        labels, traps = [], []
        for r in rows:
            if r.item_key.startswith(TRAP_PREFIX):
                traps.append(TrapResult(worker=r.worker_id, assignment=r.assignment_id, item=r.item_key, value=r.value,
                                        passed=r.value <= stage.traps.max_rating))
            else:
                labels.append(Label(item=r.item_key, worker=r.worker_id, assignment=r.assignment_id, value=r.value))
        return labels, traps

    def simulate(self, worker: SimulatedWorker, form: PageForm, truth_of: Callable[[str], float],
                 rng: np.random.Generator) -> list[tuple[str, str]]:
        return [(s.radio_name, str(likert_answer(worker, truth_of(s.text), rng))) for s in form.slots if s.radio_name is not None]


def likert_answer(worker: SimulatedWorker, truth: float, rng: np.random.Generator) -> int:
    """A simulated worker's 1..5 Likert rating (5 = extremely important) of an item of hidden importance
    `truth` in [0, 1]: the truth as the worker perceives it (its bias, Gaussian noise) mapped to the scale;
    a constant spammer gives its constant, a random spammer any value."""
    import numpy as np

    if worker.kind == "constant_spammer":
        return worker.constant
    if worker.kind == "random_spammer":
        return int(rng.integers(1, 6))
    perceived = truth + worker.bias + rng.normal(0.0, worker.noise)
    return int(np.clip(np.rint(1 + 4 * perceived), 1, 5))
