"""`campaign bench quality`: the Likert stage run for real (daemon, built-in marketplace, simulated
crowd) with 0%, 10% and 25% spammers, with and without the quality policy.

For each setting it reports the Pearson correlation of the exported scores with the hidden truth, the
share of spammer labels kept out of the scores (excluded or rejected), the share of good workers
wrongly blocked or rejected, and the money paid to spammers (from the ledger). Spammers are split
evenly between constant and random answerers; a fifth of the HITs carry a trap sentence.

`--real` runs the policy alone (no daemon) on Snow et al.'s (2008) real ratings (7 affect tasks, 100
headlines x 10 workers; wordsim, 30 pairs x 10) and reports, per task, Pearson of the item means with
the expert gold keeping everyone and after the policy, with a paired bootstrap over items.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
from sqlmodel import col, select

from campaign.crowd.models import make_pool, rng_for
from campaign.jsonout import dumps
from campaign.money import fmt
from campaign.paths import shared_data_dir
from campaign.quality.evidence import Label
from campaign.quality.review import PolicyConfig, review

SPAM_LEVELS = (0.0, 0.1, 0.25)
HONEST = {"diligent": 0.6, "noisy": 0.25, "biased": 0.15}
TRAPS = ("This sentence is not important.", "Barack Obama graduated from Harvard Law.")


def write_inputs(folder: Path, items: int, seed: int) -> tuple[Path, Path]:
    rng = rng_for("bench-quality-items", seed)
    truth = rng.uniform(0, 1, size=items)
    props, tr = folder / "props.tsv", folder / "truth.tsv"
    with props.open("w", encoding="utf-8") as p, tr.open("w", encoding="utf-8") as t:
        p.write("id\ttext\n")
        t.write("id\timportance\n")
        for i, v in enumerate(truth):
            p.write(f"p{i:04d}\tStatement number {i} about the topic (case {seed}).\n")
            t.write(f"p{i:04d}\t{v:.6f}\n")
    return props, tr


def mix_for(spam: float) -> dict[str, float]:
    mix = {k: v * (1 - spam) for k, v in HONEST.items()}
    if spam > 0:
        mix["constant_spammer"] = spam / 2
        mix["random_spammer"] = spam / 2
    return mix


def spec_text(props: Path, truth: Path, workers: int, spam: float, policy: bool, adversaries: float = 0.0) -> str:
    """The bench's spec; `adversaries`: the share of the crowd that is adversarial (`crowd.adversaries`)."""
    mix = ", ".join(f"{k}: {v}" for k, v in mix_for(spam).items())
    traps = ", ".join(json.dumps(t) for t in TRAPS)
    return f"""campaigns:
  - name: bench
    topic: A topic
    input:
      propositions: {props}
    task:
      kind: likert
      traps:
        share: 0.2
        texts: [{traps}]
    budget: "500.00"
    crowd:
      kind: simulated
      workers: {workers}
      mix: {{{mix}}}
      speed: 3600
      arrival_span: 10m
      truth: {truth}
{f"      adversaries: {{share: {adversaries}}}" + chr(10) if adversaries else ""}    quality:
      enabled: {str(policy).lower()}
    schedule:
      poll_interval: 0.2
"""


def one_run(items: int, workers: int, spam: float, policy: bool, seed: int, adversaries: float = 0.0) -> dict:
    from scipy.stats import pearsonr

    from campaign.daemon import RunOptions, run
    from campaign.inputs import load_truth
    from campaign.spec import load_spec
    from campaign.store import AssignmentRow, JudgmentRow, LedgerRow, Store, WorkerRow

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        props, tr = write_inputs(folder, items, seed)
        (folder / "c.yaml").write_text(spec_text(props, tr, workers, spam, policy, adversaries), encoding="utf-8")
        spec = load_spec(folder / "c.yaml")
        code = run(spec, RunOptions(state_dir=folder / "state", seed=seed, max_seconds=600))
        if code != 0:
            raise RuntimeError(f"bench run failed with exit code {code}")
        c = spec.campaigns[0]
        pool = make_pool(c.crowd.workers, seed, dict(c.crowd.mix), arrival_span=c.crowd.arrival_span)
        spammers = {w.worker_id for w in pool if w.is_spammer}
        truth = load_truth(tr)
        rows = [json.loads(line) for line in (folder / "state" / "bench" / "scores.jsonl").read_text().splitlines()]
        r = pearsonr([x["score"] for x in rows], [truth[x["item"]] for x in rows])[0]
        store = Store.open(folder / "state")
        with store.session() as s:
            labels = s.exec(select(JudgmentRow.worker_id, JudgmentRow.excluded, AssignmentRow.status)
                            .join(AssignmentRow, col(AssignmentRow.assignment_id) == col(JudgmentRow.assignment_id))
                            .where(col(JudgmentRow.item_key).notlike("trap:%"))).all()
            rejected = {w for w in s.exec(select(AssignmentRow.worker_id).where(AssignmentRow.status == "rejected")).all()}
            blocked = {w.worker_id for w in s.exec(select(WorkerRow).where(WorkerRow.blocked == True)).all()}  # noqa: E712
            seen = {w.worker_id for w in s.exec(select(WorkerRow)).all()}
            paid = s.exec(select(LedgerRow.amount, AssignmentRow.worker_id)
                          .join(AssignmentRow, col(AssignmentRow.assignment_id) == col(LedgerRow.assignment_id))
                          .where(col(LedgerRow.kind).in_(("charge", "bonus_charge")))).all()
        store.close()
    spam_labels = [(ex, st) for w, ex, st in labels if w in spammers]
    kept_out = sum(1 for ex, st in spam_labels if ex or st == "rejected")
    good = seen - spammers
    return {
        "pearson": float(r),
        "spammer_labels_excluded": kept_out / len(spam_labels) if spam_labels else 0.0,
        "good_workers_wrongly_blocked": len((rejected | blocked) & good) / len(good) if good else 0.0,
        "paid_to_spammers": sum((Decimal(a) for a, w in paid if w in spammers), Decimal("0")),
    }


def _item_means(labels: Sequence[Label], items: Sequence[str], leave_out: set[str]) -> np.ndarray:
    index = {it: k for k, it in enumerate(items)}
    total, count = np.zeros(len(items)), np.zeros(len(items))
    for lab in labels:
        if lab.worker not in leave_out:
            total[index[lab.item]] += lab.value
            count[index[lab.item]] += 1
    return total / np.maximum(count, 1)


def paired_bootstrap(ours: np.ndarray, base: np.ndarray, gold: np.ndarray, resamples: int = 2000,
                     seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of Pearson(ours, gold) - Pearson(base, gold), items resampled together."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(gold), size=(resamples, len(gold)))

    def rows_r(x: np.ndarray) -> np.ndarray:
        xs, gs = x[idx], gold[idx]
        xs = xs - xs.mean(axis=1, keepdims=True)
        gs = gs - gs.mean(axis=1, keepdims=True)
        return (xs * gs).sum(axis=1) / np.sqrt((xs ** 2).sum(axis=1) * (gs ** 2).sum(axis=1))

    diff = rows_r(ours) - rows_r(base)
    lo, hi = np.percentile(diff, [2.5, 97.5])
    return float(lo), float(hi)


def real_task(task: str, config: PolicyConfig | None = None, resamples: int = 2000) -> dict:
    """The policy (no traps: real ratings carry none) on one Snow et al. (2008) rating task."""
    from campaign.datasets import snow2008

    ratings, gold = snow2008.load_numeric(task)
    labels = [Label(r.item, r.worker, r.assignment, r.value) for r in ratings]
    result = review(labels, [], config or PolicyConfig())
    items = sorted(gold)
    g = np.array([gold[i] for i in items])
    every, kept = _item_means(labels, items, set()), _item_means(labels, items, result.excluded)
    lo, hi = paired_bootstrap(kept, every, g, resamples)
    r_all, r_policy = float(np.corrcoef(every, g)[0, 1]), float(np.corrcoef(kept, g)[0, 1])
    out = sum(1 for lab in labels if lab.worker in result.excluded)
    return {"pearson_all": round(r_all, 4), "pearson_policy": round(r_policy, 4), "ci_low": round(lo, 5),
            "ci_high": round(hi, 5), "labels_excluded_share": round(out / len(labels), 4),
            "workers_excluded": len(result.excluded), "workers": len(result.evidence), "items": len(items)}


def real(resamples: int = 2000) -> dict:
    """Every Snow et al. rating task: Pearson of the item means with the expert gold, keeping everyone
    and after the policy, with the paired-bootstrap 95% interval of the difference (policy - all)."""
    from campaign.datasets import snow2008

    tasks = {task: real_task(task, resamples=resamples) for task in snow2008.NUMERIC}
    summary = {"not_significantly_worse": all(t["ci_high"] >= 0 for t in tasks.values()),
               "resamples": resamples, "target": "ci_high >= 0 on every task (policy not significantly below keeping everyone)"}
    return {"tasks": tasks, "summary": summary}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="campaign bench quality", description=__doc__)
    ap.add_argument("--items", type=int, default=150, help="propositions in the simulated Likert stage (default: 150)")
    ap.add_argument("--workers", type=int, default=24, help="simulated workers (default: 24)")
    ap.add_argument("--seeds", type=int, default=2, help="seeded repetitions (default: 2)")
    ap.add_argument("--quick", action="store_true", help="40 items, 1 seed")
    ap.add_argument("--json", action="store_true", help="print exactly one JSON object")
    ap.add_argument("--adversaries", type=float, default=0.0, metavar="SHARE",
                    help="this share of every run's crowd is adversarial (crowd.adversaries; docs/hostile-crowd.md)")
    ap.add_argument("--real", action="store_true", help="the policy on real ratings (Snow et al. 2008) against the gold")
    ap.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples for --real")
    args = ap.parse_args(argv)
    if args.real:
        return _main_real(args)
    if args.quick:
        args.items, args.seeds = 40, 1
    import logging

    logging.getLogger("apscheduler").setLevel(logging.ERROR)
    t0 = time.monotonic()
    out: dict[str, dict] = {}
    for spam in SPAM_LEVELS:
        out[str(spam)] = {}
        for policy in (True, False):
            runs = [one_run(args.items, args.workers, spam, policy, seed, args.adversaries) for seed in range(1, args.seeds + 1)]
            out[str(spam)]["with_policy" if policy else "without_policy"] = {
                "pearson": round(statistics.mean(r["pearson"] for r in runs), 4),
                "spammer_labels_excluded": round(statistics.mean(r["spammer_labels_excluded"] for r in runs), 4),
                "good_workers_wrongly_blocked": round(statistics.mean(r["good_workers_wrongly_blocked"] for r in runs), 4),
                "paid_to_spammers": fmt(sum((r["paid_to_spammers"] for r in runs), Decimal("0")) / len(runs)),
            }
    clean = out["0.0"]["without_policy"]["pearson"]
    recovered = out["0.25"]["with_policy"]["pearson"] / clean if clean else 0.0
    summary: dict[str, Any] = {"clean_pearson": clean, "recovered_share_at_25pct": round(recovered, 4),
               "target": "with 25% spammers recover >= 95% of the clean correlation; wrongly block < 1% of good workers",
               "met": recovered >= 0.95 and out["0.25"]["with_policy"]["good_workers_wrongly_blocked"] < 0.01,
               "seconds": round(time.monotonic() - t0, 1), "items": args.items, "workers": args.workers, "seeds": args.seeds}
    if args.json:
        print(dumps({**out, "summary": summary}))
        return 0
    print(f"Likert stage, {args.items} items, {args.workers} workers, {args.seeds} seed(s), 20% of HITs with a trap")
    print(f"{'spam':>5} {'policy':>7} {'pearson':>8} {'spam labels out':>16} {'good wrongly hit':>17} {'paid to spammers':>17}")
    for level, d in out.items():
        for k, v in d.items():
            print(f"{float(level):>5.0%} {('on' if k == 'with_policy' else 'off'):>7} {v['pearson']:>8.3f} "
                  f"{v['spammer_labels_excluded']:>16.1%} {v['good_workers_wrongly_blocked']:>17.1%} {'$' + v['paid_to_spammers']:>17}")
    print(f"with 25% spammers the policy recovers {recovered:.1%} of the clean crowd's correlation ({clean:.3f}); "
          f"target met: {summary['met']} ({summary['seconds']} s)")
    return 0


def _main_real(args: argparse.Namespace) -> int:
    if shared_data_dir() is None:
        print("campaign bench quality --real: needs ../shared/data/snow2008 (real crowd data), which is absent here",
              file=sys.stderr)
        return 2
    out = real(args.resamples)
    if args.json:
        print(dumps(out))
        return 0
    print("review policy on Snow et al. (2008) ratings, no traps: Pearson of item means with the gold, "
          f"paired bootstrap over items ({args.resamples} resamples), CI of policy - all")
    print(f"{'task':<9} {'pearson_all':>11} {'pearson_policy':>14} {'ci_low':>8} {'ci_high':>8} {'labels_excluded_share':>22}")
    for task, t in out["tasks"].items():
        print(f"{task:<9} {t['pearson_all']:>11.3f} {t['pearson_policy']:>14.3f} {t['ci_low']:>+8.3f} {t['ci_high']:>+8.3f} "
              f"{t['labels_excluded_share']:>22.1%}")
    print(f"not significantly worse on every task: {out['summary']['not_significantly_worse']}")
    return 0
