"""`campaign bench ranking`: how fast each comparison strategy finds the top items, on a simulated crowd.

Three strategies spend the same number of derived pairs (pairwise comparisons obtained):
  random_pairs     each crowd judgment is one uniformly random pair;
  random_rankings  random 5-item HITs, each worker ranking -> its 10 pairs;
  adaptive         batches chosen from TrueSkill's posterior (`campaign.plan.pairs`, the "window"
                   planner by default: the items least sure to be in or out of the top `keep`, ranked
                   with their neighbours by mean), packed into 5-item HITs (`campaign.plan.pack`),
                   each ranking -> 10 pairs.
After every `--step` pairs the batch Bradley–Terry refit (the scores a campaign exports) is compared
with the hidden truth: Spearman rho, top-25 and top-50 precision, mean and sd over seeds.

The crowd is `campaign.crowd.models` (Thurstone noise per worker kind, spammers answering at random or
leaving the shown order, which the bench shuffles). Each HIT gets one assignment so every strategy
spends judgments one at a time. Truth and crowd are seeded: the same seed gives the same output.

The target (issue 16): adaptive batches above random 5-item rankings at every checkpoint from 300
pairs on, and random rankings' final top-50 reached with at most 70% of the pairs.

A "limits" section (not with --quick or --no-limits) measures why adaptive rankings miss the earlier
target (random single pairs' final top-50 within 60% of the pairs): the same planner spending single pairs, an allocator
that knows the truth, and how many random pairs one ranking-derived pair is worth. Its JSON sits under
"limits", beside the contracted "strategies".

The real-data section ranks each UKPConvArg1 topic's arguments from the raw worker judgements with the
same refit ('equal' counts as half a win each way) and reports Spearman against the published
graph-based ranking (UKPConvArgRank).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from campaign.aggregate.bradley_terry import fit_from_matrix, ranking_to_pairs
from campaign.aggregate.trueskill_online import DEFAULT_RANKING_MODE, OnlineRanker
from campaign.crowd.models import DEFAULT_NOISE, SimWorker, make_pool, rng_for, stable_seed
from campaign.jsonout import dumps
from campaign.paths import shared_data_dir
from campaign.plan.pack import pack_pairs
from campaign.plan.pairs import (
    DEFAULT_BATCH_PAIRS,
    DEFAULT_PLANNER,
    PLANNERS,
    count_matrix,
    membership_probability,
    select_pairs,
)
from campaign.tasks.ranking import ranking_answer

STRATEGIES = ("random_pairs", "random_rankings", "adaptive")
HIT_SIZE = 5
POOL_SIZE = 40
TARGET_RATIO = 0.70  # issue 16: random rankings' final top-50 with <= 70% of the pairs
FROM_PAIRS = 300  # ... and above random rankings at every checkpoint from here on
PAIRS_TARGET_RATIO = 0.60  # the earlier goal against random single pairs, still measured by "limits"
# Multiplier on the crowd's per-kind Thurstone noise, calibrated so random pairs + the batch refit land
# near the independently measured Spearman ~0.93 at 1,500 pairs (100 items, 10% spammers): x1.5 gave
# 0.930 over 10 seeds (diligent 0.18, noisy 0.45, biased 0.225 on the 0..1 truth scale).
DEFAULT_NOISE_SCALE = 1.5


@dataclass(frozen=True)
class Settings:
    items: int = 100
    spam: float = 0.10
    seeds: int = 20
    first_seed: int = 0
    max_pairs: int = 1500
    step: int = 100
    keep: int = 50
    batch_pairs: int = DEFAULT_BATCH_PAIRS
    noise_scale: float = DEFAULT_NOISE_SCALE
    prior_sd: float = 2.0
    ranking_mode: str = DEFAULT_RANKING_MODE
    planner: str = DEFAULT_PLANNER


# ---- simulated world ---------------------------------------------------------------------------------
def crowd_mix(spam: float) -> dict[str, float]:
    """Honest kinds in fixed proportions, `spam` split evenly between the two spammer kinds."""
    honest = {"diligent": 0.65, "noisy": 0.25, "biased": 0.10}
    mix = {k: v * (1.0 - spam) for k, v in honest.items()}
    if spam > 0:
        mix["random_spammer"] = spam / 2
        mix["constant_spammer"] = spam / 2
    return mix


def make_world(s: Settings, seed: int) -> tuple[np.ndarray, list[SimWorker]]:
    truth = rng_for("bench-ranking-truth", seed).uniform(0.0, 1.0, size=s.items)
    noise = {k: v * s.noise_scale for k, v in DEFAULT_NOISE.items()}
    pool = make_pool(POOL_SIZE, stable_seed("bench-ranking-pool", seed), crowd_mix(s.spam), noise=noise)
    return truth, pool


def judge(shown: Sequence[Any], truth: np.ndarray, pool: list[SimWorker], rng: np.random.Generator) -> list[int]:
    """One assignment: a random worker orders the shown items (shuffled first); best first."""
    order = [int(x) for x in rng.permutation(list(shown))]
    worker = pool[int(rng.integers(len(pool)))]
    return [order[k] for k in ranking_answer(worker, truth[order].tolist(), rng)]


# ---- evaluation --------------------------------------------------------------------------------------
def evaluate(scores: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    rho = float(spearmanr(scores, truth)[0])
    true_order = np.argsort(-truth, kind="stable")
    est_order = np.argsort(-scores, kind="stable")
    out = {"spearman": rho}
    for k in (25, 50):
        kk = min(k, len(truth))
        out[f"top{k}"] = len(set(true_order[:kk].tolist()) & set(est_order[:kk].tolist())) / kk
    return out


class Recorder:
    """Collects derived pairs into a win matrix and evaluates the batch refit at each checkpoint."""

    def __init__(self, s: Settings, truth: np.ndarray) -> None:
        self.s = s
        self.truth = truth
        self.wins = np.zeros((s.items, s.items))
        self.count = 0
        self.rows: list[dict[str, float]] = []
        self.next_check = s.step

    def add(self, pairs: Sequence[tuple[Any, Any]]) -> None:
        """Add derived pairs one by one so checkpoints fall exactly on multiples of `step`."""
        for w, l in pairs:
            if self.done:
                return
            self.wins[w, l] += 1
            self.count += 1
            if self.count == self.next_check:
                fit = fit_from_matrix(range(self.s.items), self.wins, prior_sd=self.s.prior_sd)
                self.rows.append({"pairs": self.count, **evaluate(fit.scores, self.truth)})
                self.next_check += self.s.step

    @property
    def done(self) -> bool:
        return self.count >= self.s.max_pairs


def run_random_pairs(s: Settings, seed: int) -> list[dict[str, float]]:
    truth, pool = make_world(s, seed)
    rng = rng_for("bench-ranking", "random_pairs", seed)
    rec = Recorder(s, truth)
    while not rec.done:
        i, j = rng.choice(s.items, size=2, replace=False)
        ranking = judge([int(i), int(j)], truth, pool, rng)
        rec.add([(ranking[0], ranking[1])])
    return rec.rows


def run_random_rankings(s: Settings, seed: int) -> list[dict[str, float]]:
    truth, pool = make_world(s, seed)
    rng = rng_for("bench-ranking", "random_rankings", seed)
    rec = Recorder(s, truth)
    while not rec.done:
        shown = [int(x) for x in rng.choice(s.items, size=HIT_SIZE, replace=False)]
        rec.add(ranking_to_pairs(judge(shown, truth, pool, rng)))
    return rec.rows


def run_adaptive(s: Settings, seed: int, ranking_mode: str | None = None) -> tuple[list[dict[str, float]], OnlineRanker]:
    """Rounds of `batch_pairs` pairs (as the daemon's batches): chosen from TrueSkill's posterior, packed
    into 5-item HITs, each HIT ranked by one worker; the model is updated after every round."""
    truth, pool = make_world(s, seed)
    rng = rng_for("bench-ranking", "adaptive", seed)
    items = list(range(s.items))
    ranker = OnlineRanker(items, ranking_mode=ranking_mode or s.ranking_mode)
    rec = Recorder(s, truth)
    compared: list[tuple[Any, Any]] = []
    hits_per_round = max(1, s.batch_pairs // math.comb(HIT_SIZE, 2))
    for rnd in range(10 * s.max_pairs):  # bound; each round adds >= 10 pairs, so it ends long before
        if rec.done:
            break
        means, sigmas = np.asarray(ranker.means()), np.asarray(ranker.sigmas())
        counts = count_matrix(items, compared)
        chosen = select_pairs(items, means, sigmas, keep=s.keep, batch_pairs=s.batch_pairs, counts=counts,
                              seed=stable_seed("bench-ranking-select", seed, rnd), planner=s.planner)
        p = membership_probability(means, sigmas, s.keep)
        fill = [int(i) for i in np.argsort(-(p * (1 - p)), kind="stable")]
        for hit in pack_pairs(chosen, size=HIT_SIZE, fill=fill, max_hits=hits_per_round):
            ranking = judge(list(hit), truth, pool, rng)
            ranker.update_ranking(ranking)
            derived = ranking_to_pairs(ranking)
            compared.extend(derived)
            rec.add(derived)
    return rec.rows, ranker


# ---- what limits the adaptive strategy ---------------------------------------------------------------
# The target compares strategies per derived pair, and a 5-item ranking's 10 pairs come from 5 noisy
# perceptions, not 20: they are worth less than 10 independent pairs. These runs separate that cost from
# the planner's own: the same planner spending single pairs, and an allocator that knows the truth.
def run_adaptive_pairs(s: Settings, seed: int) -> list[dict[str, float]]:
    """The adaptive planner with each chosen pair asked on its own (a 2-item HIT), batch by batch."""
    truth, pool = make_world(s, seed)
    rng = rng_for("bench-ranking", "adaptive_pairs", seed)
    items = list(range(s.items))
    ranker = OnlineRanker(items)
    rec = Recorder(s, truth)
    compared: list[tuple[int, int]] = []
    for rnd in range(10 * s.max_pairs):
        if rec.done:
            break
        chosen = select_pairs(items, np.asarray(ranker.means()), np.asarray(ranker.sigmas()), keep=s.keep,
                              batch_pairs=min(s.batch_pairs, s.step), counts=count_matrix(items, compared),
                              seed=stable_seed("bench-ranking-select-pairs", seed, rnd))
        for i, j in chosen:
            winner, loser = judge([i, j], truth, pool, rng)
            ranker.update_pairs([(winner, loser)])
            compared.append((winner, loser))
            rec.add([(winner, loser)])
    return rec.rows


def oracle_allocation(truth: np.ndarray, keep: int, appearances: float, floor: float = 3.0,
                      sigma: float = 0.3) -> np.ndarray:
    """Appearances per item that minimise expected misplacements around the true keep boundary.

    Each item gets `floor` appearances (a relative comparison cannot place an item it never saw); the rest
    go where one more noisy look lowers Phi(-d sqrt(k) / sigma) the most, d being the item's true distance
    from the boundary: the classic allocation for deciding which side of a threshold each mean lies. With
    few looks to spend it skips the items closest to the boundary (no affordable number of looks settles
    them) and favours those a little further out.
    """
    order = np.sort(truth)[::-1]
    d = np.abs(truth - 0.5 * (order[keep - 1] + order[keep]))
    grid = np.linspace(0.05, 200.0, 4000)
    gain = d[:, None] / (2 * sigma * np.sqrt(grid)) * np.exp(-0.5 * (d[:, None] * np.sqrt(grid) / sigma) ** 2)
    spare = max(0.0, appearances - floor * len(truth))

    def at(lam: float) -> np.ndarray:
        ok = gain >= lam
        last = ok.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1)
        return np.where(ok.any(axis=1), grid[last], 0.0)

    lo, hi = 1e-9, 1e3
    for _ in range(80):  # bisection on the Lagrange multiplier until the extra looks add up to `spare`
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if at(mid).sum() > spare else (lo, mid)
    return floor + at(hi)


def run_oracle(s: Settings, seed: int, at_pairs: int) -> list[dict[str, float]]:
    """Knows the truth: 5-item HITs from the items furthest below an allocation planned for `at_pairs`."""
    truth, pool = make_world(s, seed)
    rng = rng_for("bench-ranking", "oracle", seed)
    target = oracle_allocation(truth, s.keep, at_pairs / math.comb(HIT_SIZE, 2) * HIT_SIZE)
    used = np.zeros(s.items)
    rec = Recorder(s, truth)
    while not rec.done:
        deficit = target - used + 1e-6 * rng.random(s.items)
        hit = [int(i) for i in np.argsort(-deficit)[:HIT_SIZE]]
        used[hit] += 1
        rec.add(ranking_to_pairs(judge(hit, truth, pool, rng)))
    return rec.rows


def _pairs_for(curve: list[dict[str, Any]], value: float) -> float | None:
    """Pairs at which a (mean top-50) curve first reaches `value`, linearly interpolated; None if never."""
    prev_p, prev_v = 0.0, 0.0
    for r in curve:
        p, v = float(r["pairs"]), float(r["top50"]["mean"])
        if v >= value:
            return prev_p + (p - prev_p) * ((value - prev_v) / (v - prev_v) if v > prev_v else 1.0)
        prev_p, prev_v = p, v
    return None


def limits(s: Settings, seeds: Sequence[int], strategies: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Why adaptive rankings fall short of the target, measured: see the section comment above."""
    goal_pairs = int(PAIRS_TARGET_RATIO * s.max_pairs)
    final = float(strategies["random_pairs"][-1]["top50"]["mean"])
    ap = summarise([run_adaptive_pairs(s, seed) for seed in seeds])
    oracle = summarise([run_oracle(s, seed, goal_pairs) for seed in seeds])
    reached = _pairs_for(ap, final)
    # A ranking's derived pair in random pairs' currency: random pairs needed for random rankings' top-50.
    worth = []
    for r in strategies["random_rankings"]:
        if int(r["pairs"]) >= s.max_pairs // 3:
            eq = _pairs_for(strategies["random_pairs"], float(r["top50"]["mean"]))
            if eq is not None:
                worth.append(eq / int(r["pairs"]))
    at_goal = {name: next((float(r["top50"]["mean"]) for r in curve if r["pairs"] == goal_pairs), None)
               for name, curve in (("adaptive", strategies["adaptive"]), ("adaptive_pairs", ap), ("oracle", oracle),
                                   ("random_rankings", strategies["random_rankings"]))}
    return {
        "goal_pairs": goal_pairs,
        "random_pairs_final_top50": final,
        "top50_at_goal": at_goal,
        "adaptive_pairs": ap,
        "adaptive_pairs_reach": reached,
        "adaptive_pairs_ratio": None if reached is None else reached / s.max_pairs,
        "oracle": oracle,
        "ranking_pair_worth": float(np.mean(worth)) if worth else None,
    }


RUNNERS: dict[str, Callable[[Settings, int], list[dict[str, float]]]] = {
    "random_pairs": run_random_pairs,
    "random_rankings": run_random_rankings,
    "adaptive": lambda s, seed: run_adaptive(s, seed)[0],
}


def summarise(per_seed: list[list[dict[str, float]]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(min(len(r) for r in per_seed)):
        row: dict[str, Any] = {"pairs": int(per_seed[0][k]["pairs"])}
        for metric in ("spearman", "top25", "top50"):
            vals = np.array([r[k][metric] for r in per_seed])
            row[metric] = {"mean": float(vals.mean()), "sd": float(vals.std(ddof=1)) if len(vals) > 1 else 0.0}
        out.append(row)
    return out


def target_check(strategies: dict[str, list[dict[str, Any]]], max_pairs: int) -> dict[str, Any]:
    """Issue 16's goal: adaptive batches beat random 5-item rankings (mean top-50) at every checkpoint
    from 300 pairs on, and reach random rankings' final top-50 with at most 70% of the pairs. Issue 30
    words the first half "never behind", which a tie meets: both readings are reported, with the
    margin at each checkpoint, and "met" keeps the stricter one. The earlier goal (random single
    pairs' final top-50 within 60%) is kept under "vs_random_pairs"."""
    adaptive, rankings = strategies["adaptive"], strategies["random_rankings"]
    margins = [float(a["top50"]["mean"]) - float(r["top50"]["mean"])
               for a, r in zip(adaptive, rankings) if int(a["pairs"]) >= FROM_PAIRS]
    final = float(rankings[-1]["top50"]["mean"])
    reached = next((r["pairs"] for r in adaptive if float(r["top50"]["mean"]) >= final - 1e-12), None)
    ratio = (int(reached) / max_pairs) if reached is not None else None
    beats = bool(margins) and min(margins) > 0
    # Issue 30 words the target "never behind": a checkpoint where the two means are equal is not behind
    # (the rounding guard: means over the same seeds of multiples of 1/50 can differ by float noise only).
    never_behind = bool(margins) and min(margins) > -1e-9
    final_pairs = float(strategies["random_pairs"][-1]["top50"]["mean"])
    reached_pairs = next((r["pairs"] for r in adaptive if float(r["top50"]["mean"]) >= final_pairs - 1e-12), None)
    return {"random_rankings_final_top50": final, "adaptive_pairs": reached, "ratio": ratio, "goal": TARGET_RATIO,
            "beats_random_rankings_from": FROM_PAIRS, "worst_margin_over_random_rankings": min(margins) if margins else None,
            "beats_random_rankings": beats, "never_behind_random_rankings": never_behind,
            "margins_over_random_rankings": {int(a["pairs"]): float(a["top50"]["mean"]) - float(r["top50"]["mean"])
                                             for a, r in zip(adaptive, rankings) if int(a["pairs"]) >= FROM_PAIRS},
            "met": beats and ratio is not None and ratio <= TARGET_RATIO,
            "vs_random_pairs": {"random_pairs_final_top50": final_pairs, "adaptive_pairs": reached_pairs,
                                "ratio": None if reached_pairs is None else int(reached_pairs) / max_pairs,
                                "goal": 0.60}}


def trueskill_mode_check(s: Settings, seeds: Sequence[int]) -> dict[str, Any]:
    """Apply each 5-item ranking as one 5-way match or as its 10 pairs; compare at the final checkpoint.

    Measured on the adaptive strategy (the only place TrueSkill steers anything): the exported
    BT refit's top-50 precision and Spearman, plus how well TrueSkill's own means track the truth.
    """
    out: dict[str, Any] = {}
    for mode in ("match", "pairs"):
        top50, rho, ts_rho = [], [], []
        for seed in seeds:
            rows, ranker = run_adaptive(s, seed, ranking_mode=mode)
            truth, _ = make_world(s, seed)
            top50.append(rows[-1]["top50"])
            rho.append(rows[-1]["spearman"])
            ts_rho.append(float(spearmanr(ranker.means(), truth)[0]))
        out[mode] = {"top50": float(np.mean(top50)), "spearman": float(np.mean(rho)),
                     "trueskill_spearman": float(np.mean(ts_rho))}
    return out


# ---- real data: UKPConvArg1 ---------------------------------------------------------------------------
def load_ukpconvarg1(base: Path) -> tuple[dict[str, list[tuple[str, str, str]]], dict[str, dict[str, float]]]:
    """Per topic: worker judgements (arg1, arg2, value) and the published rank score per argument."""
    judgements: dict[str, list[tuple[str, str, str]]] = {}
    with gzip.open(base / "ukpconvarg1_full_worker_labels.tsv.gz", "rt", encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            judgements.setdefault(row["topic"], []).append((row["arg1_id"], row["arg2_id"], row["value"]))
    ranks: dict[str, dict[str, float]] = {}
    for path in sorted((base / "ranking").glob("*.csv")):
        scores: dict[str, float] = {}
        with path.open(encoding="utf-8", newline="") as fh:
            for n, line in enumerate(fh):
                parts = line.rstrip("\n").split("\t")
                if n == 0 or len(parts) < 2:
                    continue
                scores[parts[0]] = float(parts[1])
        ranks[path.stem] = scores
    return judgements, ranks


def ukp_comparisons(rows: Sequence[tuple[str, str, str]], ties: str = "half") -> list[tuple[str, str, float]]:
    out: list[tuple[str, str, float]] = []
    for a1, a2, value in rows:
        if value == "a1":
            out.append((a1, a2, 1.0))
        elif value == "a2":
            out.append((a2, a1, 1.0))
        elif value == "equal" and ties == "half":
            out += [(a1, a2, 0.5), (a2, a1, 0.5)]
    return out


def ukpconvarg1_topics() -> dict[str, tuple[list[str], list[tuple[str, str, str]], dict[str, float]]] | None:
    """Per topic of ../shared/data/ukpconvarg1 (None when absent): its arguments (sorted), their
    judgements (arg1, arg2, value) and the published rank score per argument."""
    base = shared_data_dir()
    if base is None or not (base / "ukpconvarg1").is_dir():
        return None
    judgements, ranks = load_ukpconvarg1(base / "ukpconvarg1")
    # Judgements are matched to ranking files by argument id, not by topic name: one topic is spelled
    # differently in the two sources ("...-comnong-good" in the XML-derived labels, "...-common-good" here).
    topic_of = {arg: topic for topic, scores in ranks.items() for arg in scores}
    by_topic: dict[str, list[tuple[str, str, str]]] = {}
    for rows in judgements.values():
        for a1, a2, value in rows:
            if a1 in topic_of and topic_of.get(a2) == topic_of[a1]:
                by_topic.setdefault(topic_of[a1], []).append((a1, a2, value))
    return {t: (sorted(ranks[t]), by_topic.get(t, []), ranks[t]) for t in sorted(ranks)}


def ukpconvarg1_spearman(prior_sd: float = 2.0, ties: str = "half") -> dict[str, float] | None:
    """Spearman of our refit vs the published ranking per topic, or None when the data is absent."""
    topics = ukpconvarg1_topics()
    if topics is None:
        return None
    from campaign.aggregate.bradley_terry import fit_bradley_terry

    out: dict[str, float] = {}
    for topic, (items, rows, published) in topics.items():
        fit = fit_bradley_terry(items, ukp_comparisons(rows, ties), prior_sd=prior_sd)
        # The published score is larger for LESS convincing arguments (its top scorer in the water-bottle
        # topic is "jesus loves plastic water bottles..."; raw win counts correlate about -0.95 with it),
        # so agreement is measured against the negated score.
        out[topic] = float(spearmanr(fit.scores, [-published[i] for i in items])[0])
    return out


# ---- CLI ---------------------------------------------------------------------------------------------
def run(s: Settings, mode_check: bool = True, real: bool = True, with_limits: bool = False) -> dict[str, Any]:
    seeds = list(range(s.first_seed, s.first_seed + s.seeds))
    strategies = {name: summarise([RUNNERS[name](s, seed) for seed in seeds]) for name in STRATEGIES}
    result: dict[str, Any] = {"strategies": strategies, "target": target_check(strategies, s.max_pairs)}
    if with_limits:
        result["limits"] = limits(s, seeds, strategies)
    result["settings"] = {**s.__dict__, "noise": {k: round(v * s.noise_scale, 6) for k, v in DEFAULT_NOISE.items()},
                          "mix": crowd_mix(s.spam), "pool": POOL_SIZE, "assignments_per_hit": 1}
    if mode_check:
        result["trueskill_mode"] = trueskill_mode_check(s, seeds[: max(1, min(len(seeds), 10))])
    if real:
        ukp = ukpconvarg1_spearman(prior_sd=s.prior_sd)
        if ukp is None:
            result["ukpconvarg1_skipped"] = "../shared/data/ukpconvarg1 absent (fresh clone); real-data section skipped"
        else:
            result["ukpconvarg1"] = ukp
            result["ukpconvarg1_mean"] = float(np.mean(list(ukp.values())))
            result["ukpconvarg1_ties"] = "equal = half a win each way"
    return result


def _fmt(cell: dict[str, float]) -> str:
    return f"{cell['mean']:.3f}±{cell['sd']:.3f}"


def print_table(result: dict[str, Any], out=None) -> None:
    out = out or sys.stdout
    strategies: dict[str, list[dict]] = result["strategies"]
    st = result["settings"]
    print(f"ranking bench: {st['items']} items, spam {st['spam']:.0%}, {st['seeds']} seeds ({st['first_seed']}-{st['first_seed'] + st['seeds'] - 1}), noise x{st['noise_scale']} "
          f"{st['noise']}, BT prior sd {st['prior_sd']}", file=out)
    head = f"{'pairs':>6}  {'strategy':<16} {'spearman':>13} {'top25':>13} {'top50':>13}"
    print(head, file=out)
    print("-" * len(head), file=out)
    for k in range(len(strategies["random_pairs"])):
        for name in STRATEGIES:
            r = strategies[name][k]
            print(f"{r['pairs']:>6}  {name:<16} {_fmt(r['spearman']):>13} {_fmt(r['top25']):>13} {_fmt(r['top50']):>13}",
                  file=out)
    t = result["target"]
    reach = ("never" if t["ratio"] is None else f"at {t['adaptive_pairs']} pairs = ratio {t['ratio']:.2f}")
    worst = t["worst_margin_over_random_rankings"]
    print(f"target: adaptive reaches random_rankings' final top-50 ({t['random_rankings_final_top50']:.3f}) {reach} "
          f"(goal <= {t['goal']}); beats random_rankings at every checkpoint from {t['beats_random_rankings_from']} pairs: "
          f"{t['beats_random_rankings']}, never behind: {t['never_behind_random_rankings']} "
          f"(worst margin {'-' if worst is None else f'{worst:+.3f}'}); "
          f"{'met' if t['met'] else 'NOT met'}", file=out)
    vp = t["vs_random_pairs"]
    print(f"        vs random_pairs' final top-50 ({vp['random_pairs_final_top50']:.3f}): "
          + ("never reached" if vp["ratio"] is None else f"reached at {vp['adaptive_pairs']} pairs = ratio {vp['ratio']:.2f}"),
          file=out)
    if "limits" in result:
        lim: dict = result["limits"]
        g = lim["goal_pairs"]
        at = lim["top50_at_goal"]
        print(f"limits: top-50 at {g} pairs (the goal) vs random pairs' final {lim['random_pairs_final_top50']:.3f}:", file=out)
        for name, label in (("adaptive", "adaptive 5-item rankings"), ("random_rankings", "random 5-item rankings"),
                            ("adaptive_pairs", "same planner, single pairs"),
                            ("oracle", "rankings placed knowing the truth")):
            v = at.get(name)
            print(f"  {label:<34} {'-' if v is None else f'{v:.3f}'}", file=out)
        reach = lim["adaptive_pairs_reach"]
        print("  the planner on single pairs reaches random pairs' final top-50 at "
              + (f"{reach:.0f} pairs (ratio {lim['adaptive_pairs_ratio']:.2f})" if reach is not None else "no checkpoint"),
              file=out)
        if lim["ranking_pair_worth"] is not None:
            print(f"  a derived pair from a random 5-item ranking is worth {lim['ranking_pair_worth']:.2f} of a random "
                  f"pair (random pairs needed for the same top-50)", file=out)
    if "trueskill_mode" in result:
        for mode, v in result["trueskill_mode"].items():
            print(f"trueskill ranking mode {mode:<5}: adaptive final top50 {v['top50']:.3f}, refit spearman "
                  f"{v['spearman']:.3f}, trueskill-means spearman {v['trueskill_spearman']:.3f}", file=out)
    if "ukpconvarg1" in result:
        ukp: dict[str, float] = result["ukpconvarg1"]
        print(f"ukpconvarg1 ({result['ukpconvarg1_ties']}): BT refit vs published ranking, per topic:", file=out)
        for topic, rho in ukp.items():
            print(f"  {rho:6.3f}  {topic}", file=out)
        print(f"  mean Spearman over {len(ukp)} topics: {result['ukpconvarg1_mean']:.3f}", file=out)
    elif "ukpconvarg1_skipped" in result:
        print(f"ukpconvarg1: skipped: {result['ukpconvarg1_skipped']}", file=out)


def parse_args(argv: Sequence[str]) -> tuple[Settings, argparse.Namespace]:
    ap = argparse.ArgumentParser(prog="campaign bench ranking", description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=100, help="items to rank (default: 100)")
    ap.add_argument("--spam", type=float, default=0.10, help="share of spammers in the crowd, 0 to <1 (default: 0.10)")
    ap.add_argument("--seeds", type=int, default=20, help="seeded repetitions; figures are their mean and sd (default: 20)")
    ap.add_argument("--first-seed", type=int, default=0, help="the first seed; seeds run from here (default: 0; e.g. 10 for held-out seeds)")
    ap.add_argument("--max-pairs", type=int, default=1500, help="pairs each strategy spends in all (default: 1500)")
    ap.add_argument("--step", type=int, default=100, help="pairs between two checkpoints against the truth (default: 100)")
    ap.add_argument("--keep", type=int, default=50, help="size of the top the adaptive planner aims at (default: 50)")
    ap.add_argument("--batch-pairs", type=int, default=DEFAULT_BATCH_PAIRS, help="pairs per adaptive batch, as the daemon plans them")
    ap.add_argument("--noise-scale", type=float, default=DEFAULT_NOISE_SCALE, help="multiplier of every worker kind's Thurstone noise")
    ap.add_argument("--prior-sd", type=float, default=2.0, help="prior standard deviation of the Bradley-Terry refit (default: 2.0)")
    ap.add_argument("--ranking-mode", choices=("match", "pairs"), default=DEFAULT_RANKING_MODE, help="how a 5-item ranking updates TrueSkill: one match, or its 10 pairs")
    ap.add_argument("--planner", choices=PLANNERS, default=DEFAULT_PLANNER, help="the adaptive pair planner (campaign.plan.pairs)")
    ap.add_argument("--quick", action="store_true", help="3 seeds, up to 600 pairs, no mode check, no limits")
    ap.add_argument("--no-real", action="store_true", help="skip the UKPConvArg1 section")
    ap.add_argument("--no-limits", action="store_true", help="skip the 'limits' section (two more strategies per seed)")
    ap.add_argument("--no-mode-check", action="store_true", help="skip the TrueSkill ranking-mode comparison")
    ap.add_argument("--json", action="store_true", help="print exactly one JSON object")
    a = ap.parse_args(list(argv))
    if a.quick:
        a.seeds = min(a.seeds, 3)
        a.max_pairs = min(a.max_pairs, 600)
    if a.items < HIT_SIZE or a.step <= 0 or a.max_pairs < a.step or a.seeds < 1 or a.first_seed < 0 or not 0 <= a.spam < 1:
        ap.error("need --items >= 5, --step > 0, --max-pairs >= --step, --seeds >= 1, --first-seed >= 0, 0 <= --spam < 1")
    s = Settings(items=a.items, spam=a.spam, seeds=a.seeds, first_seed=a.first_seed, max_pairs=a.max_pairs, step=a.step, keep=min(a.keep, a.items),
                 batch_pairs=a.batch_pairs, noise_scale=a.noise_scale, prior_sd=a.prior_sd, ranking_mode=a.ranking_mode,
                 planner=a.planner)
    return s, a


def main(argv: list[str]) -> int:
    s, a = parse_args(argv)
    t0 = time.perf_counter()
    result = run(s, mode_check=not (a.quick or a.no_mode_check), real=not a.no_real, with_limits=not (a.quick or a.no_limits))
    result["seconds"] = round(time.perf_counter() - t0, 2)
    if a.json:
        print(dumps(result))
    else:
        print_table(result)
        print(f"({result['seconds']} s)")
    return 0
