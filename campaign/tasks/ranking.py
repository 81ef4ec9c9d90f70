"""The ranking task (seed 000 §4.3): five propositions per HIT put in order of importance by drag and
drop (or the keyboard); an answer must be a full permutation of the items shown, and each ranking
yields its ten pairwise comparisons.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from itertools import combinations
from typing import TYPE_CHECKING, Any

from campaign.aggregate.trueskill_online import OnlineRanker
from campaign.plan.pack import pack_pairs
from campaign.plan.pairs import count_matrix, pair_budget, select_pairs, should_stop
from campaign.rng import rng_for
from campaign.stage import Stage, _integer, _number, _string, opt
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
)
from campaign.tasks.kind import (
    BatchInput,
    BatchPlan,
    Export,
    PlanItem,
    ReviewedJudgment,
    StageData,
    TaskKind,
    answers_with_workers,
)

if TYPE_CHECKING:
    import numpy as np

    from campaign.quality.evidence import Label, TrapResult
    from campaign.simulation import PageForm, SimulatedWorker

KIND = "ranking"
# the comparisons' own scores come last, so every column before them keeps its place for readers by position
RANKING_COLUMNS = ("rank", "item", "score", "uncertainty", "comparisons", "wins", "kept",
                   "likert_score", "likert_n", "likert_sd", "text", "comparison_score", "comparison_uncertainty")


def page(items: Sequence[ShownItem], topic: str, title: str, instructions: str | None = None,
         template: str | None = None) -> str:
    """The HIT's page: a list to reorder, its order kept in one hidden field."""
    return render_page("ranking.html", template, instructions, title=title, topic=topic, items=items,
                           initial_order=",".join(str(i) for i in range(len(items))))


def render(items: Sequence[ShownItem], topic: str, title: str) -> str:
    return html_question(page(items, topic, title))


def parse(fields: Sequence[tuple[str, str]], item_keys: Sequence[str]) -> list[Judgment]:
    """The order (most important first) as one judgment per item: value = position, 1 = most important."""
    got = answer_fields(fields)
    unknown = sorted(set(got) - {"order", "comment"})
    if unknown:
        raise InvalidAnswer(f"unexpected fields: {', '.join(unknown[:5])}")
    raw = single(got, "order").strip()
    parts = [p.strip() for p in raw.split(",")] if raw else []
    n = len(item_keys)
    # ASCII digits of at most 6 characters: str.isdigit() also takes "²" (which int() refuses) and
    # "٣", and int() refuses more than 4,300 digits with a bare ValueError
    if not all(p.isascii() and p.isdigit() and len(p) <= 6 for p in parts) or sorted(int(p) for p in parts) != list(range(n)):
        raise InvalidAnswer(f"order must be a permutation of the {n} items shown, got {raw[:40]!r}")
    return [Judgment(item_key=item_keys[int(slot)], value=float(pos)) for pos, slot in enumerate(parts, start=1)]


def pairs(judgments: Sequence[Judgment]) -> list[tuple[str, str]]:
    """The (winner, loser) comparisons one ranking implies: n(n-1)/2 of them, ten for five items."""
    ordered = [j.item_key for j in sorted(judgments, key=lambda j: j.value)]
    return [(a, b) for a, b in combinations(ordered, 2)]


MIN_WEIGHT = 0.1  # an order that agrees with nobody still counts a little (one review's r over a few HITs is noisy)


def answer_weights(agreement: Mapping[str, float], workers: Sequence[str]) -> list[float]:
    """How much each worker's orders count in the refit: their agreement with the other workers in the stage
    (worker-rest r of their positions), at least `MIN_WEIGHT`; a worker the review could not measure counts
    as the crowd's median. Quality control leaves out the orders of workers it can call random answerers
    (significantly below the crowd, `campaign.quality.review`); a worker with a few HITs rarely gets there,
    so a random answerer it cannot call still weighs a tenth of a careful one (r 0.6-0.8) instead of as
    much. On the hostile bench (seeds 1-3, orders as collected) this raised Spearman with the truth from
    0.776 to 0.840 with adversaries and moved it from 0.916 to 0.906 without them."""
    median = statistics.median(agreement.values()) if agreement else 1.0
    return [max(MIN_WEIGHT, min(1.0, agreement.get(w, median))) for w in workers]


def source_evidence(rows: Sequence[Mapping[str, Any]]) -> dict[str, tuple[float, float]]:
    """Each source-stage row's score with its standard error: the row's `uncertainty` where the source
    gives one (a ranking), else a mean's, `sd / sqrt(n)`, with the stage's pooled sd (an item's own sd
    from ~5 ratings is itself noisy, and 0 when they happen to agree). Rows without either are left out."""
    out: dict[str, tuple[float, float]] = {}
    sds = [float(r["sd"]) ** 2 for r in rows if isinstance(r.get("sd"), (int, float)) and int(r.get("n") or 0) >= 2]
    pooled = statistics.fmean(sds) ** 0.5 if sds else None
    for r in rows:
        score, unc, n = r.get("score"), r.get("uncertainty"), r.get("n")
        if not isinstance(score, (int, float)):
            continue
        if isinstance(unc, (int, float)):
            out[str(r["item"])] = (float(score), float(unc))
        elif pooled is not None and isinstance(n, int) and n >= 1:
            out[str(r["item"])] = (float(score), pooled / n ** 0.5)
    return out


def orders(answers: Sequence[Sequence[Judgment]]) -> list[list[str]]:
    """Each answer as its items best first (ties by item key), traps left out.

    Sorting plain (value, key) tuples instead of judgments by a key function: every batch orders every
    answer so far, and at 25,000 rankings this was half of a batch's planning."""
    out: list[list[str]] = []
    for js in answers:
        ranked = sorted([(j.value, j.item_key) for j in js])
        out.append([k for _, k in ranked if not k.startswith(TRAP_PREFIX)])
    return out


def online_model(items: Sequence[str], ranks: Sequence[Sequence[str]]) -> OnlineRanker:
    """The online TrueSkill model replayed from every counted ranking, in the answers' fixed order."""
    return _apply(OnlineRanker(list(items)), items, ranks)


def _apply(model: OnlineRanker, items: Sequence[str], ranks: Sequence[Sequence[str]]) -> OnlineRanker:
    known = set(items)
    for r in ranks:
        kept = [i for i in r if i in known]
        if len(kept) >= 2:
            model.update_ranking(kept)
    return model


def _digest(ranks: Sequence[Sequence[str]]) -> str:
    return hashlib.sha1(json.dumps([list(r) for r in ranks]).encode("utf-8")).hexdigest()


def _digests(ranks: Sequence[Sequence[str]], n: int) -> tuple[str, str]:
    """`_digest(ranks[:n])` and `_digest(ranks)` from one serialization: a JSON list's text is its first
    part's text without the closing bracket, ", ", and the rest's text without the opening one."""
    head = json.dumps([list(r) for r in ranks[:n]])
    tail = json.dumps([list(r) for r in ranks[n:]])
    full = tail if n == 0 else head if n == len(ranks) else f"{head[:-1]}, {tail[1:]}"
    return hashlib.sha1(head.encode("utf-8")).hexdigest(), hashlib.sha1(full.encode("utf-8")).hexdigest()


def resume(items: Sequence[str], ranks: Sequence[Sequence[str]], saved: Mapping[str, Any] | None) -> tuple[OnlineRanker, str]:
    """`resumed_model(...)` and the digest of all of `ranks` (what `model_state` stores), hashing once."""
    if saved is not None and saved.get("items") == list(items):
        n = int(saved["applied"])
        if n <= len(ranks):
            head, full = _digests(ranks, n)
            if saved["digest"] == head:
                return _apply(OnlineRanker.from_dict(saved["model"]), items, ranks[n:]), full
    return online_model(items, ranks), _digest(ranks)


def resumed_model(items: Sequence[str], ranks: Sequence[Sequence[str]], saved: Mapping[str, Any] | None) -> OnlineRanker:
    """`online_model(items, ranks)`, from the model saved at the last batch plus only the rankings
    that came since: the same ratings bit for bit (TrueSkill's updates are pure and the saved ratings
    round-trip through JSON exactly), at a cost that follows the new rankings instead of all of them
    (a replay made planning quadratic: about a minute per batch at 1,000 shortlisted items).

    The saved model is used only when the rankings it applied are still, in order, the first ones now
    (answers are ordered by HIT key, whose batch number grows); when quality control has since left
    one out or let one in, everything is replayed."""
    return resume(items, ranks, saved)[0]


def model_state(items: Sequence[str], ranks: Sequence[Sequence[str]], model: OnlineRanker,
                digest: str | None = None) -> dict[str, Any]:
    """What `resumed_model` needs next time: the model after `ranks`, and which rankings those were
    (`digest`: `_digest(ranks)` when the caller has it already)."""
    return {"items": list(items), "applied": len(ranks), "digest": digest or _digest(ranks),
            "model": model.to_dict(events=False)}


def with_traps(stage: Stage, hits: list[tuple], campaign: str, seed: int, batch: int) -> list[tuple]:
    """A `traps.share` of the batch's HITs get one trap sentence at a random position (it must end up
    last, or near it); deterministic in the seed and batch."""
    if stage.traps.share <= 0 or not hits:
        return hits
    traps = [f"{TRAP_PREFIX}{stage.name}:{j}" for j in range(len(stage.traps.texts))]
    rng = rng_for("ranking-traps", campaign, stage.name, seed, batch)
    n = int(round(stage.traps.share * len(hits)))
    chosen = set(int(i) for i in rng.choice(len(hits), size=n, replace=False)) if n else set()
    out = []
    for k, hit in enumerate(hits):
        group = list(hit)
        if k in chosen:
            group.insert(int(rng.integers(0, len(group) + 1)), traps[int(rng.integers(0, len(traps)))])
        out.append(tuple(group))
    return out


@dataclass(frozen=True, kw_only=True)
class RankingStage(Stage):
    """Seed 000 §4.3: 5 propositions per ranking HIT, 5 workers, $0.05."""

    needs_input = "propositions"
    needs_source = True
    min_items_per_hit = 2

    kind: str = "ranking"
    items_per_hit: int = 5
    assignments: int = 5
    reward: Decimal = Decimal("0.05")
    title: str = "Order five statements by importance"
    description: str = "Put five short statements in order, from most to least important for a summary of a topic."
    source: str | None = opt(None, _string)  # name of the stage whose top items feed this one
    shortlist: int = opt(100, _integer(2))
    keep: int = opt(50, _integer(1))
    batch_pairs: int = opt(100, _integer(1))
    pair_budget: float = opt(0.10, _number(0.0, 1.0, lo_open=True))
    target_confidence: float | None = opt(None, _number(0.0, 1.0))

    def warnings(self, first: bool) -> list[tuple[str, str]]:
        out = super().warnings(first)
        if first:  # a first ranking stage ranks every input item: no shortlist applies
            return out
        if self.keep >= self.shortlist:
            out.append(("keep", f"{self.keep} is not below shortlist ({self.shortlist}): every shortlisted item is kept, so "
                                "the batches have no boundary to settle and are planned as if keep were one less "
                                "than the candidates"))
        if self.shortlist < self.items_per_hit:
            out.append(("shortlist", f"{self.shortlist} is fewer than a HIT shows ({self.items_per_hit}): the stage ranks "
                                     "only if items tied at the cut make up a HIT"))
        return out


def batch_state(saved: Any) -> dict[str, Any]:
    """A ranking stage's state between batches (`Keys.batch_state`): the pairs planned so far and the model
    they were planned from; campaigns planned before the model was kept saved a bare list of pairs."""
    return saved if isinstance(saved, dict) else {"pairs": list(saved or []), "model": None}


def _ranking(stage: Stage) -> RankingStage:
    if not isinstance(stage, RankingStage):
        raise TypeError(f"stage {stage.name!r} is read as {type(stage).__name__}, not RankingStage")
    return stage


class RankingKind(TaskKind):
    """Orders of 5 items, planned in adaptive batches over a shortlist of an earlier stage (seed 000 §5.4).

    Each batch is chosen from the online TrueSkill model; the export is a Bradley-Terry refit over all
    comparisons, weighted by each worker's agreement with the crowd (it does not depend on the order
    answers arrived in), beside the source stage's scores.
    """

    name = KIND
    stage_type = RankingStage
    batch_planned = True
    policed = True

    def plan(self, stage: Stage, items: Sequence[PlanItem], traps: Sequence[str], seed: int) -> list[HitDraft]:
        raise NotImplementedError("a ranking stage is planned in batches, not from items")

    def _source(self, stage: Stage, campaign_stages: Sequence[Stage]) -> Stage | None:
        """The stage whose scores feed this one: `source`, else the first stage, unless that is this one."""
        source = _ranking(stage).source
        if source:
            return next(s for s in campaign_stages if s.name == source)
        first = campaign_stages[0]
        return None if first.name == stage.name else first

    def candidates(self, stage: Stage, data: StageData) -> list[str]:
        """Top `shortlist` items of the source stage, plus every item tied with the last one (seed 000 §5.4);
        a ranking stage that comes first ranks every input item."""
        source = self._source(stage, data.campaign.stages)
        if source is None:
            return data.items()
        scores = data.scores(source.name)
        shortlist = _ranking(stage).shortlist
        if len(scores) > shortlist:
            cut = scores[shortlist - 1]["score"]
            return [r["item"] for r in scores if r["score"] >= cut]
        return [r["item"] for r in scores]

    def cut(self, stage: Stage, campaign_stages: Sequence[Stage]) -> tuple[Stage, int] | None:
        """The source stage and `shortlist`: `candidates` takes its top `shortlist` items and every item
        tied with the last of them, so the pair budget (a share of the candidates' pairs) grows with
        the ties (seed 000 §5.4: the top 100 and their ties were 112 items on average)."""
        source = self._source(stage, campaign_stages)
        return None if source is None else (source, _ranking(stage).shortlist)

    def pairs_at_most(self, stage: Stage, n_candidates: int) -> int | None:
        return pair_budget(n_candidates, _ranking(stage).pair_budget)

    def plan_batch(self, stage: Stage, inp: BatchInput) -> BatchPlan:
        stage = _ranking(stage)
        items = list(inp.items)
        if len(items) < stage.items_per_hit:
            return BatchPlan(stop=f"only {len(items)} items, nothing to rank", stop_level="warning")
        state = batch_state(inp.state)
        planned = list(state["pairs"])
        budget = pair_budget(len(items), stage.pair_budget)
        ranks = orders(inp.answers)
        model, digest = resume(items, ranks, state["model"])
        means, sigmas = model.means(), model.sigmas()
        keep = min(stage.keep, len(items) - 1)
        stop, why = should_stop(len(items), len(planned), means, sigmas, keep=keep, budget=budget,
                                target=stage.target_confidence)
        progress = {"mean_sigma": sum(sigmas) / len(sigmas), "pairs_planned": len(planned)} if inp.batch > 0 else None
        if stop:
            return BatchPlan(stop=why, progress=progress)
        counts = count_matrix(items, [tuple(p) for p in planned])
        want = min(stage.batch_pairs, budget - len(planned))
        pairs = select_pairs(items, means, sigmas, keep=keep, batch_pairs=want, counts=counts, seed=inp.seed * 1000 + inp.batch)
        if not pairs:
            return BatchPlan(stop="", progress=progress)
        by_sigma = [i for _, i in sorted(zip((-s for s in sigmas), items))]
        groups = with_traps(stage, pack_pairs(pairs, size=stage.items_per_hit, fill=by_sigma), inp.campaign, inp.seed, inp.batch)
        return BatchPlan(groups=[tuple(g) for g in groups],
                         state={"pairs": planned + [list(p) for p in pairs], "model": model_state(items, ranks, model, digest)},
                         progress=progress,
                         note=f"{len(pairs)} pairs")

    def page(self, stage: Stage, items: Sequence[ShownItem], topic: str) -> str:
        return page(items, topic, stage.title, stage.instructions, stage.template)

    def parse(self, stage: Stage, fields: Sequence[tuple[str, str]], items: Sequence[ShownItem]) -> list[Judgment]:
        return parse(fields, [i.key for i in items])

    def export(self, stage: Stage, data: StageData) -> Export:
        """Over the shortlist, Bradley-Terry scores with standard errors from the comparisons, each order's
        comparisons weighted by its worker's agreement with the crowd in the stage (`answer_weights`):
        `comparison_score` and `comparison_uncertainty`. `score` and `uncertainty` add the source stage's
        evidence (`campaign.aggregate.source_prior`: the comparisons shrunk toward what the items'
        source scores predict, as much as the stage's own data says they predict it), so the ranking
        uses every answer the campaign paid for; with no source stage they equal the comparisons'.
        Items the shortlist left out follow by their source-stage score, with no ranking-stage evidence.
        `comparisons` and `wins` stay plain counts."""
        items = data.candidates(stage.name)
        known = set(items)
        comparisons: list[tuple[str, str]] = []
        weighted: list[tuple[str, str, float]] = []
        answers = answers_with_workers(data.counted(stage.name))
        owners = [w for w, _ in answers]
        for r, weight in zip(orders([a for _, a in answers]), answer_weights(data.agreement(stage.name), owners)):
            kept = [i for i in r if i in known]
            got = pairs([Judgment(item_key=k, value=float(p)) for p, k in enumerate(kept)])
            comparisons.extend(got)
            weighted.extend((w, lo, weight) for w, lo in got)
        from campaign.aggregate.bradley_terry import fit_bradley_terry  # SciPy: only where scores are made
        from campaign.aggregate.source_prior import combine

        fit = fit_bradley_terry(items, weighted) if items else None
        source_stage = self._source(stage, data.campaign.stages)
        source = {r["item"]: r for r in data.scores(source_stage.name)} if source_stage is not None else {}
        texts = data.texts()
        counts = {i: [0, 0] for i in items}
        for w, lo in comparisons:
            counts[w][0] += 1
            counts[w][1] += 1
            counts[lo][1] += 1
        rows: list[dict[str, Any]] = []
        plain = {i: (fit.score(i), fit.stderr(i)) for i in items} if fit is not None else {}
        both = combine(plain, source_evidence(list(source.values())))
        for i in items:
            lk = source.get(i, {})
            rows.append({"item": i, "score": round(both.scores[i], 6), "uncertainty": round(both.stderr[i], 6),
                         "comparison_score": round(plain[i][0], 6), "comparison_uncertainty": round(plain[i][1], 6),
                         "comparisons": counts[i][1], "wins": counts[i][0], "likert_score": lk.get("score"),
                         "likert_n": lk.get("n"), "likert_sd": lk.get("sd"), "text": texts.get(i, "")})
        rows.sort(key=lambda r: (-r["score"], r["item"]))
        keep = _ranking(stage).keep
        rest = [r for k, r in sorted(source.items(), key=lambda kv: (-kv[1]["score"], kv[0])) if k not in known]
        rows += [{"item": r["item"], "score": None, "uncertainty": None, "comparison_score": None,
                  "comparison_uncertainty": None, "comparisons": 0, "wins": 0, "likert_score": r["score"],
                  "likert_n": r["n"], "likert_sd": r["sd"], "text": r["text"]} for r in rest]
        for rank, row in enumerate(rows, start=1):
            row["rank"] = rank
            row["kept"] = rank <= keep and row["score"] is not None
        return Export(rows=rows, columns=RANKING_COLUMNS)

    def answer_labels(self, value: float, extra: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The item's position in the worker's order of its HIT, 1 = most important."""
        return [{"label": int(value)}]

    def evidence(self, stage: Stage, rows: Sequence[ReviewedJudgment]) -> tuple[list[Label], list[TrapResult]]:
        """A worker's order of a HIT's items against the mean position the other workers gave the same
        items in the same HIT (labels keyed by HIT and item); a trap passes when placed last or within
        `traps.tolerance` of last."""
        from campaign.quality.evidence import Label, TrapResult

        labels, traps = [], []
        for r in rows:
            if r.item_key.startswith(TRAP_PREFIX):
                traps.append(TrapResult(worker=r.worker_id, assignment=r.assignment_id, item=r.item_key, value=r.value,
                                        passed=r.value >= r.shown - stage.traps.tolerance))
            else:
                labels.append(Label(item=f"{r.hit_key}|{r.item_key}", worker=r.worker_id, assignment=r.assignment_id,
                                    value=-r.value))
        return labels, traps

    def simulate(self, worker: SimulatedWorker, form: PageForm, truth_of: Callable[[str], float],
                 rng: np.random.Generator) -> list[tuple[str, str]]:
        order = ranking_answer(worker, [truth_of(s.text) for s in form.slots], rng)
        return [("order", ",".join(form.slots[i].attrs.get("slot", str(form.slots[i].index)) for i in order))]


def ranking_answer(worker: SimulatedWorker, truths: Sequence[float], rng: np.random.Generator) -> list[int]:
    """A simulated worker's order of the shown items: positions (indices into `truths`) from most to least
    important, each item perceived as its truth plus Gaussian noise (Thurstone). A constant spammer
    leaves the shown order as it is, a random spammer shuffles."""
    import numpy as np

    n = len(truths)
    if worker.kind == "constant_spammer":
        return list(range(n))
    if worker.kind == "random_spammer":
        return [int(i) for i in rng.permutation(n)]
    perceived = np.asarray(truths, dtype=float) + rng.normal(0.0, worker.noise, size=n)
    return [int(i) for i in np.argsort(-perceived, kind="stable")]
