"""`campaign bench aggregation`: does `auto` take the better of majority vote and the models?

Simulated crowds, `--draws` draws each (seeded), scored against the simulated truth, in two families:

  majority wrong    biased_crowd     most annotators share one class preference (their errors all say
                                     class 0), a minority is careful: majority vote follows the bias;
                    confusable_pair  four classes, most annotators call class 3 "2" more often than not,
                                     a few experts tell them apart;
                    few_good         a few good annotators among many poor ones, each poor one with a
                                     preferred class of their own;
  models fail       three_labels     3 labels per item, 60 annotators: the models over-fit;
                    rare_class       12% positives, 3 labels per item, every error says "positive";
                    copying_clique   a clique copies one shared opinion per item (wrong 60% of the time).

For each draw: the accuracy of majority vote, MACE, Dawid-Skene and `auto`, and whether `auto` is within
0.01 of the better of majority vote and the best model, and never more than 0.01 below majority vote.

`--real` adds the real categorical sets in ../shared/data (Snow et al. 2008 RTE / TEMP / WSD against the
expert gold; UKPConvArg1 against its published gold, which is MACE's own output, so a check of agreement
rather than accuracy), each through the path `campaign aggregate --method auto` takes (the TSV written
and read back), beside majority vote, MACE and Dawid-Skene.
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from campaign.aggregate.auto import AutoAggregator
from campaign.aggregate.majority import accuracy
from campaign.jsonout import dumps
from campaign.paths import shared_data_dir

TOLERANCE = 0.01
Labels = list[tuple[int, int, int]]


@dataclass(frozen=True)
class World:
    """A simulated crowd: per annotator a confusion matrix P(label | truth), a class prior, and
    optionally a clique of annotators who all copy one shared opinion per item."""

    prior: np.ndarray
    confusion: np.ndarray  # W x K x K
    per_item: int
    items: int = 400
    clique: int = 0
    clique_err: float = 0.0


def one_coin(k: int, acc: float, errors: np.ndarray | None = None) -> np.ndarray:
    """K x K: right with probability `acc`, else a label from `errors` (uniform over the wrong ones)."""
    m = np.zeros((k, k))
    for t in range(k):
        e = np.ones(k) if errors is None else np.asarray(errors, dtype=float).copy()
        e[t] = 0.0
        if e.sum() == 0:
            e = np.ones(k)
            e[t] = 0.0
        m[t] = (1 - acc) * e / e.sum()
        m[t, t] = acc
    return m


def biased_crowd(rng: np.random.Generator) -> World:
    k = 3
    conf = []
    for w in range(40):
        if w < 28:  # 70% share one preference: when unsure, they say class 0
            conf.append(one_coin(k, rng.uniform(0.35, 0.55), np.eye(k)[0]))
        else:
            conf.append(one_coin(k, rng.uniform(0.8, 0.95)))
    return World(np.ones(k) / k, np.array(conf), per_item=5)


def confusable_pair(rng: np.random.Generator) -> World:
    k = 4
    conf = []
    for w in range(40):
        m = one_coin(k, rng.uniform(0.85, 0.95))
        if w < 32:  # most cannot tell 3 from 2: they call a 3 "2" more often than not
            slip = rng.uniform(0.5, 0.7)
            m[3] *= 1 - slip
            m[3, 2] += slip
        conf.append(m)
    return World(np.ones(k) / k, np.array(conf), per_item=5)


def few_good(rng: np.random.Generator) -> World:
    k = 3
    conf = []
    for w in range(40):
        if w < 8:
            conf.append(one_coin(k, rng.uniform(0.85, 0.97)))
        else:  # poor: a preferred class of their own
            conf.append(one_coin(k, rng.uniform(0.25, 0.45), np.eye(k)[int(rng.integers(k))]))
    return World(np.ones(k) / k, np.array(conf), per_item=7)


def _honest(rng: np.random.Generator, k: int, workers: int, errors_say: int | None = None) -> np.ndarray:
    conf = []
    for _ in range(workers):
        errors = np.eye(k)[errors_say] if errors_say is not None else rng.dirichlet(np.ones(k) * 0.7)
        conf.append(one_coin(k, rng.uniform(0.55, 0.95), errors))
    return np.array(conf)


def three_labels(rng: np.random.Generator) -> World:
    return World(np.array([0.5, 0.5]), _honest(rng, 2, 60), per_item=3)


def rare_class(rng: np.random.Generator) -> World:
    return World(np.array([0.88, 0.12]), _honest(rng, 2, 60, errors_say=1), per_item=3)


def copying_clique(rng: np.random.Generator) -> World:
    return World(np.array([0.5, 0.5]), _honest(rng, 2, 30), per_item=3, clique=6, clique_err=0.6)


CONDITIONS: dict[str, tuple[str, Callable[[np.random.Generator], World]]] = {
    "biased_crowd": ("majority wrong", biased_crowd),
    "confusable_pair": ("majority wrong", confusable_pair),
    "few_good": ("majority wrong", few_good),
    "three_labels": ("models fail", three_labels),
    "rare_class": ("models fail", rare_class),
    "copying_clique": ("models fail", copying_clique),
}


def draw(world: World, rng: np.random.Generator) -> tuple[Labels, dict[int, int]]:
    """(item, worker, label) triples and the truth; `per_item` distinct annotators per item."""
    k = len(world.prior)
    workers = len(world.confusion)
    truth = rng.choice(k, size=world.items, p=world.prior)
    labels: Labels = []
    for i, t in enumerate(truth):
        shared = int(t) if rng.random() > world.clique_err else int(rng.integers(k))
        for w in rng.choice(workers, size=world.per_item, replace=False):
            lab = shared if w < world.clique else int(rng.choice(k, p=world.confusion[w, t]))
            labels.append((i, int(w), lab))
    return labels, {i: int(t) for i, t in enumerate(truth)}


def score(labels: list, gold: dict, seed: int = 0) -> dict[str, Any]:
    auto = AutoAggregator(seed=seed).fit(labels)
    acc = {name: accuracy(m.predict(), gold) for name, m in auto.models_.items()}
    acc["auto"] = accuracy(auto.predict(), gold)
    best = max(acc["majority"], acc["mace"], acc["ds"])
    return {**{k: round(v, 4) for k, v in acc.items()}, "chose": auto.method_, "best": round(best, 4),
            "within": acc["auto"] >= best - TOLERANCE - 1e-12,
            "not_below_majority": acc["auto"] >= acc["majority"] - TOLERANCE - 1e-12, "reason": auto.reason_}


def simulate(draws: int, only: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for name, (_family, make_world) in CONDITIONS.items():
        if only and name not in only:
            continue
        rows = []
        for d in range(draws):
            rng = np.random.default_rng([30, d, list(CONDITIONS).index(name)])
            labels, truth = draw(make_world(rng), rng)
            rows.append({"draw": d, **score(labels, truth)})
        out[name] = rows
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    mean = {k: round(float(np.mean([r[k] for r in rows])), 4) for k in ("majority", "mace", "ds", "auto", "best")}
    gaps = [r["auto"] - r["best"] for r in rows]
    below = [r["auto"] - r["majority"] for r in rows]
    chose = {m: sum(r["chose"] == m for r in rows) for m in ("majority", "mace", "ds")}
    return {**mean, "worst_gap_to_best": round(min(gaps), 4), "worst_gap_to_majority": round(min(below), 4),
            "within_all": all(r["within"] for r in rows), "not_below_majority_all": all(r["not_below_majority"] for r in rows),
            "chose": chose, "draws": len(rows)}


def real_sets() -> dict[str, Any]:
    """Each real set through `campaign aggregate`'s own path: written as a labels TSV, read back, aggregated."""
    from campaign.aggregate.auto import aggregate
    from campaign.aggregate.dawid_skene import DawidSkene
    from campaign.aggregate.labels import read_labels
    from campaign.aggregate.mace import MACE
    from campaign.aggregate.majority import MajorityVote
    from campaign.datasets import snow2008, ukpconvarg1

    sets: dict[str, tuple[list, dict, str]] = {
        t: (*snow2008.load(t), "expert gold") for t in ("rte", "temp", "wsd")}
    data = ukpconvarg1.load()
    sets["ukpconvarg1"] = (data.labels, data.gold, "published gold (MACE's own output)")
    out: dict[str, Any] = {}
    for name, (labels, gold, against) in sets.items():
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "labels.tsv"
            with path.open("w", encoding="utf-8", newline="") as fh:
                w = csv.writer(fh, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
                w.writerow(["item", "worker", "label"])
                w.writerows((str(i), str(wk), str(lab)) for i, wk, lab in labels)
            triples = read_labels(path)
        t0 = time.perf_counter()
        items, _, method, evidence = aggregate(triples, "auto")
        seconds = time.perf_counter() - t0
        g = {str(k): str(v) for k, v in gold.items()}
        acc = {"majority": accuracy(MajorityVote().fit(triples).predict(), g), "mace": accuracy(MACE().fit(triples).predict(), g),
               "ds": accuracy(DawidSkene().fit(triples).predict(), g), "auto": accuracy(items, g)}
        best = max(acc["majority"], acc["mace"], acc["ds"])
        out[name] = {**{k: round(v, 4) for k, v in acc.items()}, "best": round(best, 4), "chose": method,
                     "within": acc["auto"] >= best - TOLERANCE - 1e-12, "against": against, "labels": len(triples),
                     "seconds": round(seconds, 1), "reason": evidence.get("reason", "")}
    return out


def print_simulated(result: dict[str, Any]) -> None:
    sim = result["simulated"]
    print(f"Simulated crowds, {result['draws']} draws each: accuracy against the simulated truth (mean over draws)")
    print(f"{'condition':<16} {'family':<15} {'majority':>8} {'MACE':>7} {'DS':>7} {'auto':>7}  {'auto-best':>9} {'auto-MV':>8}"
          f"  {'within .01':>10} {'>= MV-.01':>9}  auto chose (MV/MACE/DS)")
    for name, s in sim.items():
        c = s["chose"]
        print(f"{name:<16} {CONDITIONS[name][0]:<15} {s['majority']:>8.4f} {s['mace']:>7.4f} {s['ds']:>7.4f} {s['auto']:>7.4f}"
              f"  {s['worst_gap_to_best']:>+9.4f} {s['worst_gap_to_majority']:>+8.4f}  {str(s['within_all']):>10} "
              f"{str(s['not_below_majority_all']):>9}  {c['majority']}/{c['mace']}/{c['ds']}")
    print("(auto-best, auto-MV: the worst draw's gap; within .01 / >= MV-.01: on every draw)")


def print_tables(result: dict[str, Any]) -> None:
    sim = result["simulated"]
    if sim:
        print_simulated(result)
    real = result.get("real")
    if real:
        print("\nReal crowd sets (`campaign aggregate --method auto`), accuracy against the gold labels")
        print(f"{'set':<12} {'labels':>7} {'majority':>8} {'MACE':>7} {'DS':>7} {'auto':>7} {'auto-best':>9}  {'within .01':>10}  "
              f"{'seconds':>7}  auto chose")
        for name, r in real.items():
            print(f"{name:<12} {r['labels']:>7} {r['majority']:>8.4f} {r['mace']:>7.4f} {r['ds']:>7.4f} {r['auto']:>7.4f} "
                  f"{r['auto'] - r['best']:>+9.4f}  {str(r['within']):>10}  {r['seconds']:>7}  {r['chose']}")
        print("(ukpconvarg1's gold is the published MACE output: agreement, not accuracy)")
    elif "real_skipped" in result:
        print(f"\nReal crowd sets: skipped ({result['real_skipped']})")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="campaign bench aggregation", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=20, help="simulated crowds drawn per setting, each seeded (default: 20)")
    ap.add_argument("--condition", action="append", choices=list(CONDITIONS), help="only these conditions (repeatable)")
    ap.add_argument("--real", action="store_true", help="also the real sets in ../shared/data (UKPConvArg1 takes minutes)")
    ap.add_argument("--no-sim", action="store_true", help="skip the simulated conditions")
    ap.add_argument("--json", action="store_true", help="print exactly one JSON object")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    per_draw = {} if args.no_sim else simulate(args.draws, args.condition)
    result: dict[str, Any] = {"draws": args.draws, "tolerance": TOLERANCE,
                              "simulated": {k: summary(v) for k, v in per_draw.items()}, "per_draw": per_draw}
    if args.real:
        if shared_data_dir() is None:
            result["real_skipped"] = "needs ../shared/data (real crowd data), absent here"
        else:
            result["real"] = real_sets()
    result["seconds"] = round(time.perf_counter() - t0, 1)
    if args.json:
        print(dumps(result))
    else:
        print_tables(result)
    return 0
