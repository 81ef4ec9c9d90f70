"""`campaign simulate`: what a spec buys, before any money is spent.

The spec runs N times on virtual time (the real daemon, the built-in marketplace or the Prolific
emulator, and a simulated crowd), each run with its own seed in a temporary folder that is deleted
afterwards: nothing is written into the campaign's state. A spec aimed at real people is simulated with
workers who answer from a random hidden truth, at the spec's own rewards and fees. Each run is measured
from its store, per stage and in total: spend, simulated duration, workers needed, answers left out of
the scores, and how well the scores recover the simulated truth (Pearson; for a ranking stage the
overlap of the top k). The summary gives the median and the 10th and 90th percentiles of each.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from decimal import Decimal
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from campaign.child_process import pool_worker_bound_to
from campaign.money import fmt
from campaign.spec import Adversaries, Campaign, Crowd, Spec, load_spec

TOP_K = 10
REAL_TO_SIMULATED = {"local": "local", "mturk-sandbox": "local", "mturk": "local", "prolific": "prolific-local",
                     "prolific-local": "prolific-local"}


class SimulateError(Exception):
    """The spec cannot be simulated; the message says why."""


def as_simulation(c: Campaign, folder: Path, adversaries: float | None, seed: int) -> Campaign:
    """The campaign as a simulated run plays it: its own `crowd:` where it has a simulated one, else
    simulated workers with a random truth (written to `folder`) on the simulated twin of its marketplace."""
    crowd = c.crowd
    if crowd.kind != "simulated":
        crowd = Crowd(kind="simulated", truth=str(random_truth(c, folder, seed)))
    if adversaries is not None:
        crowd = dataclasses.replace(crowd, adversaries=dataclasses.replace(crowd.adversaries or Adversaries(), share=adversaries))
    market = REAL_TO_SIMULATED.get(c.marketplace, "local")
    return dataclasses.replace(c, crowd=crowd, marketplace=market, endpoint_url=None)


def random_truth(c: Campaign, folder: Path, seed: int) -> Path:
    from campaign.inputs import load_items
    from campaign.rng import rng_for

    rng = rng_for(seed, "simulate-truth", c.name)
    f = folder / f"{c.name}.truth.tsv"
    rows = [f"{it.key}\t{float(rng.uniform(0, 1)):.6f}" for it in load_items(c.input_kind, c.input_path)]
    f.write_text("id\timportance\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return f


def one_run(config: str, names: Sequence[str], seed: int, adversaries: float | None) -> dict[str, Any]:
    """One simulated run of the chosen campaigns, measured; runs in a worker process."""
    import logging

    from campaign.daemon import RunOptions, run

    logging.getLogger("campaign").setLevel(logging.ERROR)
    spec = load_spec(config)
    chosen = [c for c in spec.campaigns if not names or c.name in names]
    with tempfile.TemporaryDirectory(prefix="campaign-simulate-") as tmp:
        folder = Path(tmp)
        sims = tuple(as_simulation(c, folder, adversaries, seed) for c in chosen)
        state = folder / "state"
        code = run(Spec(path=spec.path, campaigns=sims), RunOptions(state_dir=state, seed=seed, max_seconds=900))
        if code != 0:
            raise SimulateError(f"the simulated run with seed {seed} stopped with exit code {code}")
        return {c.name: measure(state, c) for c in sims}


def measure(state: Path, c: Campaign) -> dict[str, Any]:
    """Per stage and in total: spend, simulated hours, workers, answers left out, reliability."""
    from sqlmodel import col, select

    from campaign.inputs import load_truth
    from campaign.state import CHARGES, AssignmentStatus
    from campaign.store import AssignmentRow, HitRow, JudgmentRow, LedgerRow, Store
    from campaign.tasks import get as get_kind

    truth = load_truth(c.crowd.truth) if c.crowd.truth else {}
    store = Store.open(state)
    try:
        with store.session() as s:
            hits = s.exec(select(HitRow.hit_key, HitRow.stage, HitRow.hit_type_id, HitRow.posted_at)
                          .where(HitRow.campaign == c.name)).all()
            assignments = [(a.assignment_id, a.stage, a.worker_id, a.status, a.decided_at) for a in
                           s.exec(select(AssignmentRow).where(AssignmentRow.campaign == c.name)).all()]
            judgments = s.exec(select(JudgmentRow.stage, JudgmentRow.assignment_id, JudgmentRow.item_key, JudgmentRow.value)
                               .where(JudgmentRow.campaign == c.name, col(JudgmentRow.excluded).is_(False))).all()
            excluded = s.exec(select(JudgmentRow.stage, JudgmentRow.assignment_id)
                              .where(JudgmentRow.campaign == c.name, col(JudgmentRow.excluded).is_(True))).all()
            ledger = s.exec(select(LedgerRow.kind, LedgerRow.amount, LedgerRow.hit_key, LedgerRow.assignment_id)
                            .where(LedgerRow.campaign == c.name, col(LedgerRow.kind).in_(CHARGES))).all()
    finally:
        store.close()
    stage_of_hit = {k: st for k, st, _, _ in hits}
    stage_of_type = {t: st for _, st, t, _ in hits if t}
    stage_of_assignment = {a: st for a, st, _, _, _ in assignments}
    names = [st.name for st in c.stages]
    spend = {n: Decimal("0") for n in names}
    for _kind, amount, hit_key, aid in ledger:
        key = hit_key or ""
        st = stage_of_hit.get(key) or stage_of_type.get(key.removeprefix("study:")) or stage_of_assignment.get(aid or "")
        spend[st if st in spend else names[0]] += Decimal(amount)
    left_out: dict[str, set[str]] = {n: set() for n in names}
    for aid, st, _w, status, _d in assignments:
        if status == AssignmentStatus.REJECTED:
            left_out.setdefault(st, set()).add(aid)
    means: dict[str, dict[str, list[float]]] = {n: {} for n in names}
    for st, aid in excluded:
        left_out.setdefault(st, set()).add(aid)
    for st, aid, item, value in judgments:
        if aid not in left_out.get(st, set()) and item in truth:
            means.setdefault(st, {}).setdefault(item, []).append(float(value))
    rows = _final_rows(state / c.name / "scores.jsonl")
    scored = {item: score for item, score in rows if score is not None}
    out: dict[str, Any] = {"stages": {}}
    for stage in c.stages:
        n = stage.name
        posted = [p for _, st, _, p in hits if st == n and p is not None]
        decided = [d for _, st, _, _, d in assignments if st == n and d is not None]
        ranked = get_kind(stage.kind).batch_planned
        if ranked:  # how well the stage orders what it was given: every candidate it scored, not only the kept
            reliability = top_k_overlap(scored, truth)
        else:
            reliability = pearson({k: statistics.fmean(v) for k, v in means.get(n, {}).items()}, truth)
        out["stages"][n] = {
            "spend": spend.get(n, Decimal("0")),
            "hours": (max(decided) - min(posted)) / 3600 if posted and decided else 0.0,
            "workers": len({w for _, st, w, _, _ in assignments if st == n}),
            "answers_excluded": len(left_out.get(n, set())),
            "reliability": reliability,
            "reliability_kind": f"top-{TOP_K} overlap, candidates" if ranked else "pearson",
        }
    posted_all = [p for _, _, _, p in hits if p is not None]
    decided_all = [d for *_, d in assignments if d is not None]
    out["total"] = {
        "spend": sum(spend.values(), Decimal("0")),
        "hours": (max(decided_all) - min(posted_all)) / 3600 if posted_all and decided_all else 0.0,
        "workers": len({w for _, _, w, _, _ in assignments}),
        "answers_excluded": len(set().union(*left_out.values())) if left_out else 0,
        **_total_reliability(rows, truth),
    }
    return out


def _total_reliability(rows: list[tuple[str, float | None]], truth: dict[str, float]) -> dict[str, Any]:
    """The campaign's final export against the truth, over every item it lists. Where every item has a
    score (one Likert stage), Pearson of the scores. A ranking export scores only its candidates and
    lists the rest after them by the earlier stage, on another scale: there, Spearman of the final order.
    (Until 2026-11-30 this was Pearson over the kept items' scores alone: 15 items of a two-stage demo,
    a range so narrow that it read 0.47-0.90 while each stage was sound.)"""
    if rows and all(score is not None for _, score in rows):
        return {"reliability": pearson({item: float(score) for item, score in rows if score is not None}, truth),
                "reliability_kind": "pearson"}
    order = {item: -float(k) for k, (item, _) in enumerate(rows)}
    return {"reliability": spearman(order, truth), "reliability_kind": "spearman, final order"}


def _final_rows(path: Path) -> list[tuple[str, float | None]]:
    """(item, score or None) of the final export, in its order (best first)."""
    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(str(r["item"]), None if r.get("score") is None else float(r["score"])) for r in rows]


def _correlation(scores: dict[str, float], truth: dict[str, float], rank: bool) -> float | None:
    """Pearson (or, with `rank`, Spearman) over the items both name; None with fewer than 3 or a constant side."""
    keys = sorted(k for k in scores if k in truth)
    if len(keys) < 3:
        return None
    from scipy.stats import pearsonr, spearmanr

    x, y = [scores[k] for k in keys], [truth[k] for k in keys]
    if len(set(x)) < 2 or len(set(y)) < 2:
        return None
    return float((spearmanr if rank else pearsonr)(x, y)[0])


def spearman(scores: dict[str, float], truth: dict[str, float]) -> float | None:
    return _correlation(scores, truth, rank=True)


def pearson(scores: dict[str, float], truth: dict[str, float]) -> float | None:
    return _correlation(scores, truth, rank=False)


def top_k_overlap(scores: dict[str, float], truth: dict[str, float], k: int = TOP_K) -> float | None:
    keys = [key for key in scores if key in truth]
    if len(keys) < k:
        return None
    ours = set(sorted(keys, key=lambda key: (-scores[key], key))[:k])
    theirs = set(sorted(keys, key=lambda key: (-truth[key], key))[:k])
    return len(ours & theirs) / k


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """Median, 10th and 90th percentile (linear interpolation between the ordered runs)."""
    xs = sorted(values)

    def q(p: float) -> float:
        pos = p * (len(xs) - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

    return {"median": q(0.5), "p10": q(0.1), "p90": q(0.9)}


def money_percentiles(values: Sequence[Decimal]) -> dict[str, str]:
    return {k: fmt(Decimal(str(v)).quantize(Decimal("0.01"))) for k, v in percentiles([float(x) for x in values]).items()}


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The runs' figures as percentiles, per campaign, per stage and in total."""
    out: dict[str, Any] = {}
    for name in runs[0]:
        parts = {"total": [r[name]["total"] for r in runs]}
        for stage in runs[0][name]["stages"]:
            parts[stage] = [r[name]["stages"][stage] for r in runs]
        summary: dict[str, Any] = {"stages": {}}
        for part, rows in parts.items():
            rel = [r["reliability"] for r in rows if r["reliability"] is not None]
            figures = {
                "spend": money_percentiles([r["spend"] for r in rows]),
                "hours": percentiles([r["hours"] for r in rows]),
                "workers": percentiles([r["workers"] for r in rows]),
                "answers_excluded": percentiles([r["answers_excluded"] for r in rows]),
                "reliability": percentiles(rel) if rel else None,
                "reliability_kind": rows[0]["reliability_kind"],
            }
            if part == "total":
                summary["total"] = figures
            else:
                summary["stages"][part] = figures
        out[name] = summary
    return out


def simulate(config: str | Path, names: Sequence[str], runs: int, seed: int, adversaries: float | None,
             jobs: int | None = None, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """`runs` simulated runs (seeds `seed`, `seed + 1`, ...) on `jobs` processes; their summary."""
    spec = load_spec(config)
    unknown = [n for n in names if n not in {c.name for c in spec.campaigns}]
    if unknown:
        raise SimulateError(f"no campaign named {', '.join(unknown)} in {config}; it has: "
                            f"{', '.join(c.name for c in spec.campaigns)}")
    jobs = max(1, min(jobs or os.cpu_count() or 1, runs))
    results: dict[int, dict[str, Any]] = {}
    if progress:
        progress(0, runs)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"), initializer=pool_worker_bound_to,
                             initargs=(os.getpid(),)) as pool:
        futures = {pool.submit(one_run, str(config), tuple(names), seed + i, adversaries): i for i in range(runs)}
        for fut in as_completed(futures):
            results[futures[fut]] = fut.result()
            if progress:
                progress(len(results), runs)
    ordered = [results[i] for i in range(runs)]
    return {"config": str(config), "runs": runs, "seeds": [seed + i for i in range(runs)],
            "adversaries": adversaries, "campaigns": summarize(ordered)}
