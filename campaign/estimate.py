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

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
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
REPLAY_BATCHES = 60  # a stage with a pair budget: batches replayed before the rest is extrapolated


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
    #: a stage cut from an earlier stage's scores (ranking's shortlist): the items tied with the cut the
    #: figures above allow for (`TIE_UPPER` of runs have no more), and over the ties' distribution
    #: (`tie_distribution`) the HITs and the cost to expect, and the fewest HITs (no tie)
    tied: int = 0
    expected_hits: Decimal | None = None
    expected_total: Decimal | None = None
    fewest_hits: int | None = None

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

    @property
    def replacements_at_most(self) -> Decimal:
        """What the replacement slots in `total` cost at most (answers refused and asked for again)."""
        return sum((s.extra * s.extra_cost for s in self.stages), Decimal("0"))


def trap_keys(stage: Stage) -> list[str]:
    """The stage's trap item keys, as the run stores them (`campaign.steps.plan.load_items`)."""
    return [f"{TRAP_PREFIX}{stage.name}:{j}" for j in range(len(stage.traps.texts) if stage.traps.share > 0 else 0)]


class _PlanningData:
    """The `StageData` a batch-planned kind asks for when it picks its candidates, before any answer:
    every earlier stage's scores in input order (so a shortlist takes its first `shortlist` items), and
    with `tied=(cut, k)` the `k` items after the first `cut` scored like the `cut`-th (so a shortlist cut
    there takes `cut + k`: ties at the cut, as a run's scores have them)."""

    def __init__(self, campaign: Campaign, items: Sequence[PlanItem], seed: int, tied: tuple[int, int] = (0, 0)) -> None:
        self._campaign, self._items, self._seed, self._tied = campaign, items, seed, tied

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
        cut, k = self._tied
        return [{"rank": i + 1, "item": it.key, "score": float(n - (cut - 1 if cut <= i < cut + k else i)), "n": 0,
                 "sd": 0.0, "text": it.text} for i, it in enumerate(self._items)]

    def candidates(self, stage: str) -> list[str]:
        return []

    def agreement(self, stage: str) -> dict[str, float]:
        return {}


def stage_batches(campaign: Campaign, stage: Stage, items: Sequence[PlanItem], seed: int,
                  tied: int = 0) -> tuple[list[list[tuple[str, ...]]], int | None]:
    """The item groups of a stage's first-pass HITs as the kind plans them, batch by batch (one batch for
    a kind planned all at once), and (batch-planned kinds) the pairs planned; traps included. `tied`:
    for a kind that cuts an earlier stage's scores (`TaskKind.cut`), how many items tie with the cut."""
    kind = get_kind(stage.kind)
    if not kind.batch_planned:
        return [[tuple(d.item_keys) for d in kind.plan(stage, items, trap_keys(stage), seed)]], None
    cut = kind.cut(stage, campaign.stages)
    candidates = kind.candidates(stage, _PlanningData(campaign, items, seed, (cut[1], tied) if cut and tied else (0, 0)))
    batches: list[list[tuple[str, ...]]] = []
    state: Any = None
    budget = kind.pairs_at_most(stage, len(candidates))
    for batch in range(MAX_BATCHES):
        if budget is not None and batch >= REPLAY_BATCHES:
            return _extrapolated(batches, state, budget)
        plan = kind.plan_batch(stage, BatchInput(campaign=campaign.name, items=candidates, answers=[], state=state,
                                                 batch=batch, seed=seed))
        if plan.stop is not None or not plan.groups:
            break
        batches.append(list(plan.groups))
        state = plan.state
    return batches, _pairs_planned(state)


def _pairs_planned(state: Any) -> int | None:
    """The pairs a batch-planned kind's state says it planned (None: a kind that plans no pairs)."""
    return len(state["pairs"]) if isinstance(state, dict) and isinstance(state.get("pairs"), list) else None


def _extrapolated(batches: list[list[tuple[str, ...]]], state: Any, budget: int) -> tuple[list[list[tuple[str, ...]]], int]:
    """A long stage's batches from its first `REPLAY_BATCHES`: the ones replayed, then the same again in
    turn until the pairs they hold reach the budget (the planner packs the same number of pairs into
    every HIT, so the count of HITs is what a full replay gives, within a batch). Why: a ranking stage
    over 2,000 candidates (a 47,000-item Likert stage's top 30 and its ties) plans 400,000 pairs, and
    replaying its 10,000 batches took `campaign validate` more than ten minutes."""
    planned = _pairs_planned(state) or 0
    if not batches or planned <= 0 or planned >= budget:
        return batches, planned
    replayed = sum(len(b) for b in batches)
    target = math.ceil(replayed * budget / planned)  # HITs at the replayed batches' pairs per HIT
    out, hits = list(batches), replayed
    while hits < target:
        nxt = batches[(len(out) - len(batches)) % len(batches)][: target - hits]
        out.append(nxt)
        hits += len(nxt)
    return out, max(budget, round(planned * target / replayed))  # whole HITs, as planned


def stage_groups(campaign: Campaign, stage: Stage, items: Sequence[PlanItem], seed: int) -> tuple[list[tuple[str, ...]], int | None]:
    """Every first-pass HIT's item group of a stage (`stage_batches` flattened)."""
    batches, pairs = stage_batches(campaign, stage, items, seed)
    return [g for b in batches for g in b], pairs


TIE_MASS = 0.9999  # the share of the ties' distribution planned (the rest is too unlikely to price)
TIE_UPPER = 0.99  # the ties the everyone-paid total allows for: exceeded in about 1 run in 100
TIE_POINTS = 24  # at most this many tie counts are planned (neighbouring counts share a plan beyond)
# a stage of more HITs than this (with its ties at TIE_UPPER) is planned once more, at the ties' mean: a
# replay of a 500-item shortlist takes seconds, and a HIT more or less is nothing to its cost
TIE_EXACT_HITS = 300


def binomial_pmf(k: Any, n: Any, p: float) -> Any:
    """P(K = k) for K ~ Binomial(n, p), elementwise over numpy arrays (0 outside 0 <= k <= n). Written
    out rather than taken from `scipy.stats.binom`: importing scipy.stats costs every `campaign run`
    with a ranking stage about half a second of start-up, for a few hundred pmf values."""
    import numpy as np
    from scipy.special import gammaln, xlog1py, xlogy

    k, n = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    inside = (k >= 0) & (k <= n)
    kk, nn = np.where(inside, k, 0.0), np.where(inside, n, 0.0)
    log = gammaln(nn + 1) - gammaln(kk + 1) - gammaln(nn - kk + 1) + xlogy(kk, p) + xlog1py(nn - kk, -p)
    return np.where(inside, np.exp(log), 0.0)


def tie_distribution(n_items: int, cut: int, levels: int) -> list[float]:
    """P(k more items tie with the `cut`-th best of `n_items`), k = 0, 1, ..., when every item's score is
    one of `levels` values, each equally likely and independent (no knowledge of the answers beyond the
    scale: the scores spread over it). Exact: with the values from the top, S (the items above value v)
    is Binomial(n, share above v) and the items at v, given S = s, Binomial(n - s, 1 / values left); the
    cut falls at v when s < cut <= s + c, and then k = s + c - cut. Truncated where the mass left is
    below 1 - TIE_MASS (the list sums to about 1).

    Measured against the runs (60 Likert items, 5 ratings: 21 levels, cut 30): the model's mean is 1.43
    more items; examples/two-stage.yaml seeds 0-11 had 1.2, examples/prolific.yaml seeds 0-9 had 1.6."""
    if levels <= 1 or cut <= 0 or cut >= n_items:
        return [1.0]
    import numpy as np

    per = n_items / levels
    kmax = min(n_items - cut, int(per + 8 * math.sqrt(per) + 10))
    s = np.arange(cut)
    ks = np.arange(kmax + 1)
    out = np.zeros(kmax + 1)
    for v in range(levels):
        ps = binomial_pmf(s, n_items, v / levels)  # P(S = s items above this value)
        if ps.max() < 1e-15:
            continue
        at = binomial_pmf(cut + ks[None, :] - s[:, None], n_items - s[:, None], 1.0 / (levels - v))
        out += ps @ at
    probs = [float(p) for p in out]
    total = 0.0
    for k, p in enumerate(probs):
        total += p
        if total >= TIE_MASS:
            return probs[: k + 1]
    return probs


def tie_points(dist: Sequence[float], most: int = TIE_POINTS) -> list[tuple[int, float]]:
    """The tie counts to plan and the probability each stands for: every count, or for a wide
    distribution `most` groups of neighbouring counts of about equal mass, each at its mean."""
    support = [(k, p) for k, p in enumerate(dist) if p > 0]
    if len(support) <= most:
        return support
    mass = sum(p for _, p in support)
    groups: list[list[tuple[int, float]]] = [[]]
    acc = 0.0
    for k, p in support:
        if groups[-1] and acc >= mass * len(groups) / most:
            groups.append([])
        groups[-1].append((k, p))
        acc += p
    out = []
    for g in groups:
        m = sum(p for _, p in g)
        out.append((round(sum(k * p for k, p in g) / m), m))
    return out


def tie_quantile(dist: Sequence[float], q: float) -> int:
    """The smallest tie count k with P(ties <= k) >= q (the last one when the list's mass is below q)."""
    acc = 0.0
    for k, p in enumerate(dist):
        acc += p
        if acc >= q:
            return k
    return len(dist) - 1


def stage_ties(campaign: Campaign, stage: Stage, n_items: int) -> list[float]:
    """The distribution of the ties at the cut of a stage that takes the top of an earlier stage's
    scores (`tie_distribution` over the source's `score_levels`); [1.0] (none) for any other stage."""
    kind = get_kind(stage.kind)
    cut = kind.cut(stage, campaign.stages) if kind.batch_planned else None
    if cut is None:
        return [1.0]
    source, at = cut
    levels = get_kind(source.kind).score_levels(source)
    return [1.0] if levels is None else tie_distribution(n_items, at, levels)


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


def _priced(campaign: Campaign, stage: Stage, batches: Sequence[Sequence[tuple[str, ...]]], pairs: int | None) -> StageEstimate:
    """A stage's HITs (its first pass as planned, `batches`, and its repeats) priced by the marketplace's rules."""
    cfg = campaign.prolific
    first = sum(len(b) for b in batches)
    repeats = sample_size(first, stage.repeat.share) if stage.repeat.share > 0 else 0
    hits = first + repeats
    assignments = hits * stage.assignments
    if cfg is not None:  # Prolific: places (bundles of HIT assignments), paid for the HITs done
        # repeats are posted together after the first pass: one batch more
        places = places_for([len(b) for b in batches] + [repeats], stage.assignments, cfg.bundle)
        # answers rejected or left out asked for again (`quality.replace_excluded`, steps.replace): at
        # most the allowance per HIT, each a HIT's share of a place, in places of their own at worst
        from campaign.prolific.verdict import places_needed

        extra = hits * extra_allowance(stage.assignments) if campaign.quality.replace_excluded else 0
        rewards, fees = prolific_work_cost(cfg, assignments + extra)
        one = sum(prolific_work_cost(cfg, 1), Decimal("0"))
        return StageEstimate(stage.name, stage.kind, hits, repeats, assignments, rewards, fees, pairs,
                             places + places_needed(extra, cfg.bundle), extra=extra, extra_cost=one)
    cost = MTURK_FEES.assignment(stage.reward, stage.assignments)
    extra = 0
    # refused answers are asked for again (steps.replace): by a kind that needs every answer, or by the spec
    if get_kind(stage.kind).replace_refused or campaign.quality.replace_excluded:
        extra = hits * extra_allowance(stage.assignments)
    rewards = stage.reward * (assignments + extra)
    return StageEstimate(stage.name, stage.kind, hits, repeats, assignments, rewards,
                         cost.fee * (assignments + extra), pairs, extra=extra, extra_cost=cost.total)


def estimate_campaign(campaign: Campaign, items: Sequence[PlanItem], seed: int = 0) -> CampaignEstimate:
    """The campaign's cost from its spec and its input items (traps are added here, as the run adds them)."""
    stages: list[StageEstimate] = []
    notes: list[str] = []
    cfg = campaign.prolific
    for stage in campaign.stages:
        ties = stage_ties(campaign, stage, len(items))
        upper = tie_quantile(ties, TIE_UPPER)
        est = _priced(campaign, stage, *stage_batches(campaign, stage, items, seed, upper))
        if len(ties) > 1:  # its size follows the ties at its cut: the expected cost over their distribution
            points = [(k, p, est if k == upper else _priced(campaign, stage, *stage_batches(campaign, stage, items, seed, k)))
                      for k, p in tie_points(ties, TIE_POINTS if est.hits <= TIE_EXACT_HITS else 1)]
            mass = sum(p for _, p, _ in points)
            expected_hits = sum(p * e.hits for _, p, e in points) / mass
            expected_total = sum((Decimal(repr(p / mass)) * e.total for _, p, e in points), Decimal("0"))
            est = replace(est, tied=upper, expected_hits=Decimal(repr(expected_hits)).quantize(Decimal("0.1")),
                          expected_total=expected_total.quantize(CENT, rounding=ROUND_HALF_UP),
                          fewest_hits=min(e.hits for _, _, e in points) if points[0][0] == 0 else None)
        stages.append(est)
        if est.hits - est.repeats == 0:
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
    if cfg is not None and cfg.pilot is not None and stages:
        notes.append(_pilot_note(cfg.pilot, stages))
    hourly = minimum = None
    if cfg is not None:
        from campaign.prolific.study import MINIMUM_HOURLY, reward_per_submission

        hourly = (reward_per_submission(cfg) * 60 / cfg.estimated_minutes).quantize(CENT, rounding=ROUND_HALF_UP)
        minimum = MINIMUM_HOURLY.get(cfg.currency)
    return CampaignEstimate(campaign.name, campaign.currency, campaign.budget, tuple(stages), bonuses, hourly, minimum,
                            tuple(notes), expected, why)


def _pilot_note(pilot: int, stages: Sequence[StageEstimate]) -> str:
    """What `prolific.pilot` runs, against the places the stages' studies need."""
    first = stages[0]
    total = sum(s.places or 0 for s in stages)
    if pilot > total:
        return (f"prolific.pilot {pilot} is more than the {total} places of the whole campaign: it ends before the pilot "
                "is over, and never pauses")
    where = (f"of stage {first.stage}'s {first.places}" if first.places is not None and pilot <= first.places
             else f"(stage {first.stage} has {first.places}: the pilot goes on into the next stage)")
    return f"pilot: the first {pilot} places {where}, then the campaign pauses for `campaign resume`"


def spammer_share(campaign: Campaign) -> float:
    """The share of a simulated crowd's workers who are spammers: `crowd.mix` allotted to its
    `crowd.workers` as the crowd allots it (`campaign.simulation.allot`), so 30 workers at 25% are 7
    spammers, 23%, not 7.5."""
    from campaign.simulation import SPAMMER_KINDS, allot

    workers = campaign.crowd.workers
    if workers <= 0:
        return 0.0
    counts = allot(workers, dict(campaign.crowd.mix))
    return sum(n for kind, n in counts.items() if kind in SPAMMER_KINDS) / workers


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
    # a stage whose size follows ties at its cut: its cost over the ties' distribution
    total = Decimal("0")
    for s in stages:
        expected_extra = min(s.extra, int(Decimal(s.assignments) * Decimal(str(share)) + Decimal("0.5")))
        total += (s.total if s.expected_total is None else s.expected_total) - s.extra_cost * (s.extra - expected_extra)
    q = campaign.quality
    if campaign.prolific is not None:  # Prolific: only submissions that failed their attention checks are rejected
        return _expected_on_prolific(campaign, stages, total, share)
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


def _expected_on_prolific(campaign: Campaign, stages: Sequence[StageEstimate], total: Decimal,
                          share: float) -> tuple[Decimal, str]:
    """The simulated crowd's expected spend on Prolific, where a submission is rejected (unpaid) only for
    failed attention checks (`campaign.prolific.checks`): per stage with traps (Likert, ranking), its
    spammers' bundles that fail enough checks (`failing_share`); everyone else is paid."""
    from campaign.prolific.checks import checks_needed, failing_share, full_bundle_chance
    from campaign.simulation import allot

    cfg = campaign.prolific
    assert cfg is not None
    kinds = allot(campaign.crowd.workers, dict(campaign.crowd.mix))
    needed = checks_needed(cfg.estimated_minutes)
    rejected, parts = 0, []
    for stage in campaign.stages:
        if stage.traps.share <= 0 or stage.kind not in ("likert", "ranking"):
            continue
        est = next(s for s in stages if s.stage == stage.name)
        if stage.kind == "likert":  # a rating outside 1..max_rating fails; a constant one fails every check or none
            fail = (5 - stage.traps.max_rating) / 5
            rate = failing_share(kinds, cfg.bundle, stage.traps.share, needed, fail, fail, True)
        else:  # a trap not placed within `tolerance` of last fails; a ranking left as shown has it where it landed
            per_hit = getattr(stage, "items_per_hit", 5)
            shown = per_hit + 1
            fail = 1 - min(shown, stage.traps.tolerance + 1) / shown
            # only a whole bundle is completed (and can be rejected); HITs drawn from the shortlist share
            # items, so most bundles end short: returned and paid per task
            full = full_bundle_chance(int(getattr(stage, "shortlist", 0) or per_hit * est.hits), per_hit, est.hits, cfg.bundle)
            rate = full * failing_share(kinds, cfg.bundle, stage.traps.share, needed, fail, fail, False)
        n = int(Decimal(est.assignments) * Decimal(str(rate)) + Decimal("0.5"))
        rejected += n
        parts.append(f"{n} of stage {stage.name}'s {est.assignments}")
    if not parts:
        return total, "no stage with attention checks: every submission is paid"
    rewards, fees = prolific_work_cost(cfg, rejected)
    return total - rewards - fees, (f"about {' and '.join(parts)} assignments in submissions rejected unpaid for failed "
                                    f"attention checks (the crowd's spammers are {share:.0%} of its workers; the others' "
                                    "submissions are paid)")


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
        if s.expected_hits is not None and s.tied:
            span = f"{s.fewest_hits}-{s.hits} HITs as up" if s.fewest_hits is not None else "up"
            extra.append(f"{span} to {s.tied} more items tie at the cut, about "
                         f"{s.expected_hits} HITs and {shown(s.expected_total or s.total, cur)} to expect")
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
    """Why the budget will stop the campaign early, or None when it covers the estimate. A budget that
    pays for every first assignment but not for every replacement the estimate allows at worst is
    told so, not that the run will stop: the demo's nugget campaign (budget $40.00, worst case $43.92
    with 122 replacement slots) spends $36.88 and finishes, and its warning said it would not."""
    if est.total <= est.budget:
        return None
    first = est.total - est.replacements_at_most
    if est.replacements_at_most > 0 and first <= est.budget:
        return (f"budget {shown(est.budget, est.currency)} pays for every first assignment ({shown(first, est.currency)}) "
                f"but not for every replacement of a refused answer the estimate allows ({shown(est.total, est.currency)} "
                f"at most): if many answers are refused, the run stops at budget_exhausted (raise `budget:` to "
                f"{shown(est.total + est.bonuses_at_most, est.currency)} to cover the worst case)")
    pct = (est.covered * 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP)
    return (f"budget {shown(est.budget, est.currency)} is below the estimate {shown(est.total, est.currency)}: it covers "
            f"about {pct}% of the campaign; the run will stop at budget_exhausted (raise `budget:` to "
            f"{shown(est.total + est.bonuses_at_most, est.currency)} to cover everything)")
