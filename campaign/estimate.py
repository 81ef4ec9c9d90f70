"""What a campaign will cost, before it starts: per stage and in total, from the spec and the items only.

The estimate plans every stage the way the run will (the task kinds' own `plan`, and for batch-planned
kinds their `plan_batch` replayed without answers until the kind stops: with no answers nothing becomes
confident early, so a ranking stage is costed at its full pair budget) and prices the HITs by the
marketplace's own fee rules: MTurk's schedule for the MTurk-API marketplaces (`campaign.money`), per
place with Prolific's fee and VAT for Prolific campaigns (`campaign.prolific.study`). It reads no store
and calls no marketplace, so `campaign validate` can print it and `campaign run` can check the budget
against it before anything is posted.

What it cannot know: how many workers quality control will reject (rejected work is not paid, so the
estimate is an upper figure of a run where everyone is paid), which items tie at a ranking shortlist's
cut, and which workers earn a bonus (given as "at most": one bonus per worker the campaign can have).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any

from campaign.metrics.reliability import sample_size
from campaign.money import CENT, MTURK_FEES, shown
from campaign.plan.extra import extra_allowance
from campaign.spec import Campaign, Spec, Stage
from campaign.tasks import get as get_kind
from campaign.tasks.base import TRAP_PREFIX
from campaign.tasks.kind import BatchInput, CountedJudgment, PlanItem

if TYPE_CHECKING:
    from campaign.prolific.study import ProlificConfig

MAX_BATCHES = 100_000  # a batch-planned kind that never stops without answers is a bug, not a cost


@dataclass(frozen=True)
class StageEstimate:
    """One stage: its HITs (first pass and repeats), the assignments they ask for, rewards and fees."""

    stage: str
    kind: str
    hits: int
    repeats: int  # repeat twins (`repeat: {share}`), inside `hits`
    assignments: int  # over all HITs
    rewards: Decimal
    fees: Decimal
    pairs: int | None = None  # batch-planned ranking: the pairs its budget allows
    places: int | None = None  # Prolific: the places (submissions) the stage's study needs
    extra: int = 0  # replacement slots at most, for a kind that needs every answer (in the totals above)
    extra_cost: Decimal = Decimal("0")  # one such slot's reward and fee

    @property
    def total(self) -> Decimal:
        return self.rewards + self.fees


@dataclass(frozen=True)
class CampaignEstimate:
    name: str
    currency: str
    budget: Decimal
    stages: tuple[StageEstimate, ...]
    bonuses_at_most: Decimal = Decimal("0")  # with their fees; not in `total`
    hourly: Decimal | None = None  # Prolific: the reward per hour of estimated time
    hourly_minimum: Decimal | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: a simulated crowd: what the run is expected to spend, its spammers' work on the stage quality
    #: control reviews being rejected (unpaid); None for real people (their share is unknown)
    expected: Decimal | None = None
    expected_why: str = ""

    @property
    def total(self) -> Decimal:
        """Rewards and fees of every HIT assignment (bonuses apart: they depend on the answers)."""
        return sum((s.total for s in self.stages), Decimal("0"))

    @property
    def covered(self) -> Decimal:
        """The share of `total` the budget pays for (1 when it covers everything)."""
        return Decimal("1") if self.total <= self.budget or self.total == 0 else self.budget / self.total


def trap_keys(stage: Stage) -> list[str]:
    """The stage's trap item keys, as the run stores them (`campaign.steps.plan.load_items`)."""
    return [f"{TRAP_PREFIX}{stage.name}:{j}" for j in range(len(stage.traps.texts) if stage.traps.share > 0 else 0)]


class _PlanningData:
    """The `StageData` a batch-planned kind asks for when it picks its candidates, before any answer:
    every earlier stage's scores in input order (so a shortlist takes its first `shortlist` items)."""

    def __init__(self, campaign: Campaign, items: Sequence[PlanItem], seed: int) -> None:
        self._campaign, self._items, self._seed = campaign, items, seed

    @property
    def campaign(self) -> Campaign:
        return self._campaign

    @property
    def seed(self) -> int:
        return self._seed

    def counted(self, stage: str) -> list[CountedJudgment]:
        return []

    def texts(self) -> dict[str, str]:
        return {it.key: it.text for it in self._items}

    def items(self) -> list[str]:
        return [it.key for it in self._items]

    def scores(self, stage: str) -> list[dict[str, Any]]:
        n = len(self._items)
        return [{"rank": i + 1, "item": it.key, "score": float(n - i), "n": 0, "sd": 0.0, "text": it.text}
                for i, it in enumerate(self._items)]

    def candidates(self, stage: str) -> list[str]:
        return []


def stage_batches(campaign: Campaign, stage: Stage, items: Sequence[PlanItem], seed: int) -> tuple[list[list[tuple[str, ...]]], int | None]:
    """The item groups of a stage's first-pass HITs as the kind plans them, batch by batch (one batch for
    a kind planned all at once), and (batch-planned kinds) the pairs planned; traps included."""
    kind = get_kind(stage.kind)
    if not kind.batch_planned:
        return [[tuple(d.item_keys) for d in kind.plan(stage, items, trap_keys(stage), seed)]], None
    candidates = kind.candidates(stage, _PlanningData(campaign, items, seed))
    batches: list[list[tuple[str, ...]]] = []
    state: Any = None
    for batch in range(MAX_BATCHES):
        plan = kind.plan_batch(stage, BatchInput(campaign=campaign.name, items=candidates, answers=[], state=state,
                                                 batch=batch, seed=seed))
        if plan.stop is not None or not plan.groups:
            break
        batches.append(list(plan.groups))
        state = plan.state
    pairs = len(state["pairs"]) if isinstance(state, dict) and isinstance(state.get("pairs"), list) else None
    return batches, pairs


def stage_groups(campaign: Campaign, stage: Stage, items: Sequence[PlanItem], seed: int) -> tuple[list[tuple[str, ...]], int | None]:
    """Every first-pass HIT's item group of a stage (`stage_batches` flattened)."""
    batches, pairs = stage_batches(campaign, stage, items, seed)
    return [g for b in batches for g in b], pairs


def places_for(batches: Sequence[int], assignments: int, bundle: int) -> int:
    """Prolific places a stage's HITs need: per batch (the HITs posted together), its assignments over
    what one submission can do, which is its bundle but never more HITs than the batch has (nobody does
    a HIT twice), so a batch of 2 HITs with 5 assignments each takes 5 places whatever the bundle."""
    from campaign.prolific.verdict import places_needed

    return sum(places_needed(hits * assignments, min(bundle, hits)) for hits in batches if hits)


def prolific_work_cost(cfg: ProlificConfig, assignments: int) -> tuple[Decimal, Decimal]:
    """(rewards, fees with VAT) of `assignments` HIT assignments on Prolific: a whole bundle is a place's
    reward, a shorter one its share per HIT (`campaign.prolific.study.work_pay`), so the work costs its
    share of a place per HIT whichever way the places are cut."""
    from campaign.prolific.study import payment_cost, reward_per_submission

    reward = reward_per_submission(cfg)
    rewards = (reward * assignments / cfg.bundle).quantize(CENT, rounding=ROUND_HALF_UP)
    total = (payment_cost(cfg, reward) * assignments / cfg.bundle).quantize(CENT, rounding=ROUND_HALF_UP)
    return rewards, total - rewards


def estimate_campaign(campaign: Campaign, items: Sequence[PlanItem], seed: int = 0) -> CampaignEstimate:
    """The campaign's cost from its spec and its input items (traps are added here, as the run adds them)."""
    stages: list[StageEstimate] = []
    notes: list[str] = []
    cfg = campaign.prolific
    for stage in campaign.stages:
        batches, pairs = stage_batches(campaign, stage, items, seed)
        first = sum(len(b) for b in batches)
        repeats = sample_size(first, stage.repeat.share) if stage.repeat.share > 0 else 0
        hits = first + repeats
        assignments = hits * stage.assignments
        if cfg is not None:  # Prolific: places (bundles of HIT assignments), paid for the HITs done
            # repeats are posted together after the first pass: one batch more
            places = places_for([len(b) for b in batches] + [repeats], stage.assignments, cfg.bundle)
            rewards, fees = prolific_work_cost(cfg, assignments)
            stages.append(StageEstimate(stage.name, stage.kind, hits, repeats, assignments, rewards, fees, pairs, places))
        else:
            cost = MTURK_FEES.assignment(stage.reward, stage.assignments)
            extra = 0
            if get_kind(stage.kind).replace_refused:  # refused answers are asked for again (steps.replace)
                extra = hits * extra_allowance(stage.assignments)
            rewards = stage.reward * (assignments + extra)
            stages.append(StageEstimate(stage.name, stage.kind, hits, repeats, assignments, rewards,
                                        cost.fee * (assignments + extra), pairs, extra=extra, extra_cost=cost.total))
        if first == 0:
            notes.append(f"stage {stage.name} plans no HIT from these items")
    bonuses = Decimal("0")
    if campaign.quality.bonus:
        amount = Decimal(campaign.quality.bonus)
        people = sum(s.assignments for s in stages)  # one bonus per worker, and no worker without an assignment
        if campaign.crowd.kind == "simulated":
            people = min(people, campaign.crowd.workers)
        if cfg is not None:
            from campaign.prolific.study import bonus_cost

            bonuses = bonus_cost(cfg, amount) * people
        else:
            bonuses = MTURK_FEES.bonus(amount).total * people
    expected, why = _expected_with_simulated_crowd(campaign, stages)
    hourly = minimum = None
    if cfg is not None:
        from campaign.prolific.study import MINIMUM_HOURLY, reward_per_submission

        hourly = (reward_per_submission(cfg) * 60 / cfg.estimated_minutes).quantize(CENT, rounding=ROUND_HALF_UP)
        minimum = MINIMUM_HOURLY.get(cfg.currency)
    return CampaignEstimate(campaign.name, campaign.currency, campaign.budget, tuple(stages), bonuses, hourly, minimum,
                            tuple(notes), expected, why)


def spammer_share(campaign: Campaign) -> float:
    """The share of a simulated crowd's workers who are spammers (`crowd.mix`)."""
    total = sum(share for _, share in campaign.crowd.mix)
    return sum(share for kind, share in campaign.crowd.mix if kind.endswith("spammer")) / total if total > 0 else 0.0


def _expected_with_simulated_crowd(campaign: Campaign, stages: Sequence[StageEstimate]) -> tuple[Decimal | None, str]:
    """The simulated crowd's expected spend: the reviewed (primary policed) stage's assignments, less the
    spammers' share that review rejects, at the marketplace's price of one assignment (on Prolific a
    HIT's share of a place: a rejected HIT inside a bundle that is still approved is paid, so this
    is a little low there)."""
    if campaign.crowd.kind != "simulated":
        return None, ""
    share = spammer_share(campaign)
    # replacement slots at most are in each stage's total; expected: one per answer a spammer gave (the
    # spammers' share of the stage's assignments, spread over its HITs), within the allowance
    total = Decimal("0")
    for s in stages:
        expected_extra = min(s.extra, int(Decimal(s.assignments) * Decimal(str(share)) + Decimal("0.5")))
        total += s.total - s.extra_cost * (s.extra - expected_extra)
    q = campaign.quality
    if not (q.enabled and q.reject_spam):
        return total, "quality control rejects nothing"
    primary = next((st for st in campaign.stages if get_kind(st.kind).policed and get_kind(st.kind).primary_evidence), None)
    if primary is None:
        return total, "no stage whose review rejects spam"
    est = next(s for s in stages if s.stage == primary.name)
    rejected = int(Decimal(est.assignments) * Decimal(str(share)) + Decimal("0.5"))
    why = (f"about {rejected} of stage {primary.name}'s {est.assignments} assignments rejected unpaid: "
           f"the crowd's spammers are {share:.0%} of its workers")
    if campaign.prolific is not None:  # a rejected HIT is paid by no share of a place
        rewards, fees = prolific_work_cost(campaign.prolific, rejected)
        return total - rewards - fees, why
    return total - MTURK_FEES.assignment(primary.reward, primary.assignments).total * rejected, why


def plan_items(campaign: Campaign) -> list[PlanItem]:
    """The campaign's input items as planning sees them (reads the input file, nothing else)."""
    from campaign.inputs import load_items

    return [PlanItem(key=it.key, doc=it.doc, text=it.text) for it in load_items(campaign.input_kind, campaign.input_path)]


def estimate_spec(spec: Spec, seed: int = 0, names: Sequence[str] = ()) -> list[CampaignEstimate]:
    return [estimate_campaign(c, plan_items(c), seed) for c in spec.campaigns if not names or c.name in names]


def describe(est: CampaignEstimate) -> list[str]:
    """The estimate as lines for people: one per stage, the total, and a warning when the budget falls short."""
    cur = est.currency
    lines = [f"cost estimate for {est.name} (everyone paid; fees by the marketplace's rules):"]
    for s in est.stages:
        extra = []
        if s.repeats:
            extra.append(f"{s.repeats} of them repeats")
        if s.pairs is not None:
            extra.append(f"pair budget {s.pairs} pairs")
        if s.places is not None:
            extra.append(f"{s.places} places")
        if s.extra:
            extra.append(f"and at most {s.extra} replacements for refused answers")
        more = f" ({', '.join(extra)})" if extra else ""
        lines.append(f"  stage {s.stage} ({s.kind}): {s.hits} HITs{more}, {s.assignments} assignments, "
                     f"rewards {shown(s.rewards, cur)} + fees {shown(s.fees, cur)} = {shown(s.total, cur)}")
    lines.append(f"  total {shown(est.total, cur)}"
                 + (f"; bonuses at most {shown(est.bonuses_at_most, cur)} more" if est.bonuses_at_most else "")
                 + f"; budget {shown(est.budget, cur)}")
    if est.expected is not None and est.expected != est.total:
        lines.append(f"  expected with this simulated crowd: {shown(est.expected, cur)} ({est.expected_why})")
    if est.hourly is not None:
        floor = f" (Prolific's minimum: {shown(est.hourly_minimum, cur)}/hour)" if est.hourly_minimum is not None else ""
        lines.append(f"  reward per hour of estimated time: {shown(est.hourly, cur)}{floor}")
    for note in est.notes:
        lines.append(f"  note: {note}")
    warning = budget_warning(est)
    if warning:
        lines.append(f"  warning: {warning}")
    return lines


def budget_warning(est: CampaignEstimate) -> str | None:
    """Why the budget will stop the campaign early, or None when it covers the estimate."""
    if est.total <= est.budget:
        return None
    pct = (est.covered * 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP)
    return (f"budget {shown(est.budget, est.currency)} is below the estimate {shown(est.total, est.currency)}: it covers "
            f"about {pct}% of the campaign; the run will stop at budget_exhausted (raise `budget:` to "
            f"{shown(est.total + est.bonuses_at_most, est.currency)} to cover everything)")
