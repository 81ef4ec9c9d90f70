"""Fixed first-pass designs for a ranking stage, scored as `campaign bench ranking` scores them.

At 300 items the first 300 derived pairs are 30 five-item HITs, too few to show every item once, and
issue 30 asks adaptive planning never to trail random 5-item rankings from that checkpoint on. This
script measures what the first 30 HITs can do at all, without a planner in the way: each design lays
out its HITs from the earlier HITs' answers only, the bench's simulated crowd (`make_world`, `judge`)
ranks them, and the bench's exported refit (Bradley-Terry, prior sd 2) is read for its top 50 after
20, 25 and 30 HITs (200, 250, 300 pairs). Designs:

  random     5 random items per HIT (the bench's random rankings)
  disjoint   5 unseen items per HIT (what the window planner's first pass does)
  chainK     4 unseen items and the item placed K-th (0 = winner) in the previous HIT: every HIT
             linked to the one before, so scores are comparable across HITs
  pairsK     HITs in twos: the second takes the item placed K-th in the first beside 4 unseen ones

Every design reads the same seeded stream of crowd draws (`rng_for("mc", seed)`), so two designs that
share their first HITs get the same answers to them. Seeds start at 1000, apart from the bench's.

    python benchmarks/ranking_first_pass.py --designs random,disjoint,chain1 --spam 0.1 --seeds 200
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from multiprocessing import Pool
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from campaign.aggregate.bradley_terry import fit_from_matrix, ranking_to_pairs  # noqa: E402
from campaign.bench import ranking as bench  # noqa: E402
from campaign.crowd.models import rng_for  # noqa: E402

ITEMS = 300
CHECKS = (20, 25, 30)  # HITs: 200, 250 and 300 derived pairs
FIRST_SEED = 1000

Design = Callable[[int, list[list[int]], np.ndarray, dict, np.random.Generator], list[int]]


def refit_scores(wins: np.ndarray) -> np.ndarray:
    """The bench's refit, fitted on the shown items only: an item never compared has no likelihood
    term, so its posterior mode is the prior's 0 either way; fitting the shown items is the same fit."""
    idx = np.flatnonzero((wins.sum(0) + wins.sum(1)) > 0)
    scores = np.zeros(len(wins))
    scores[idx] = fit_from_matrix(range(len(idx)), wins[np.ix_(idx, idx)], prior_sd=2.0).scores
    return scores


def _unseen(state: dict, k: int, shown: np.ndarray) -> list[int]:
    out: list[int] = []
    while len(out) < k:
        i = int(state["order"][state["pos"]])
        state["pos"] += 1
        if shown[i] == 0 and i not in out:
            out.append(i)
    return out


def _random(h: int, hist: list[list[int]], shown: np.ndarray, state: dict, rng: np.random.Generator) -> list[int]:
    return [int(x) for x in rng.choice(ITEMS, 5, replace=False)]


def _disjoint(h: int, hist: list[list[int]], shown: np.ndarray, state: dict, rng: np.random.Generator) -> list[int]:
    return _unseen(state, 5, shown)


def _chain(place: int) -> Design:
    def design(h: int, hist: list[list[int]], shown: np.ndarray, state: dict, rng: np.random.Generator) -> list[int]:
        return _unseen(state, 5, shown) if h == 0 else [hist[-1][place]] + _unseen(state, 4, shown)
    return design


def _paired(place: int) -> Design:
    def design(h: int, hist: list[list[int]], shown: np.ndarray, state: dict, rng: np.random.Generator) -> list[int]:
        return _unseen(state, 5, shown) if h % 2 == 0 else [hist[-1][place]] + _unseen(state, 4, shown)
    return design


DESIGNS: dict[str, Design] = {"random": _random, "disjoint": _disjoint, **{f"chain{k}": _chain(k) for k in (0, 1, 2)},
                              **{f"pairs{k}": _paired(k) for k in (0, 1)}}


def run(design: str, seed: int, spam: float) -> list[float]:
    """Top-50 overlap of the refit after each of CHECKS HITs, one seed."""
    truth, pool = bench.make_world(bench.Settings(items=ITEMS, spam=spam, seeds=1), seed)
    rng = rng_for("mc", seed)
    wins = np.zeros((ITEMS, ITEMS))
    shown = np.zeros(ITEMS, dtype=int)
    hist: list[list[int]] = []
    state = {"order": list(rng.permutation(ITEMS)), "pos": 0}
    out = []
    for h in range(max(CHECKS)):
        hit = DESIGNS[design](h, hist, shown, state, rng)
        ranking = bench.judge(hit, truth, pool, rng)
        hist.append(ranking)
        for w, lo in ranking_to_pairs(ranking):
            wins[w, lo] += 1
        shown[hit] += 1
        if h + 1 in CHECKS:
            out.append(bench.evaluate(refit_scores(wins), truth)["top50"])
    return out


def _job(args: tuple[str, int, float]) -> list[float]:
    return run(*args)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--designs", default="random,disjoint", help=f"comma-separated, of {', '.join(DESIGNS)}")
    ap.add_argument("--spam", type=float, default=0.1)
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    seeds = range(FIRST_SEED, FIRST_SEED + args.seeds)
    print(f"{ITEMS} items, spam {args.spam:.0%}, seeds {seeds[0]}-{seeds[-1]}: mean top-50 (standard error) after "
          + ", ".join(f"{h} HITs" for h in CHECKS))
    with Pool(args.jobs) as workers:
        for name in args.designs.split(","):
            res = np.array(workers.map(_job, [(name, s, args.spam) for s in seeds]))
            mean, se = res.mean(0), res.std(0, ddof=1) / np.sqrt(len(res))
            print(f"{name:<10} " + "  ".join(f"{m:.4f} ({e:.4f})" for m, e in zip(mean, se)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
