"""`campaign aggregate LABELS.tsv [--method auto|majority|mace|ds] [--json] [--seed N]`: the project's
aggregators on any crowd labels file, so data from another platform can use the aggregation alone.

The file is tab-separated with a header naming the columns `item`, `worker` and `label` (in any order;
other columns are ignored). `campaign export NAME --answers` writes such a file, with two columns this
reader also understands: `kept` (`false`: a label that does not count, e.g. a trap, excluded or rejected
work, which is left out) and `assignment` (a worker may label an item once per assignment; a label given
on several rows of one assignment, e.g. one row per nugget span, is one label). Every problem is reported as `file:line: message` and the exit code is 2,
before anything is fitted: a silently skipped row would change the answer.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from campaign import argtypes
from campaign.aggregate.labels import LabelsError, read_labels
from campaign.jsonout import dumps
from campaign.progress_bar import bar_on_terminal
from campaign.untrusted import inert

METHODS = ("auto", "majority", "mace", "ds")  # = campaign.aggregate.auto.METHODS, without importing NumPy for every command


def _finite(value: object) -> float | None:
    """A competence rounded for output; None where the method has none (or not a finite one)."""
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return round(v, 4) if math.isfinite(v) else None


def run(args: argparse.Namespace) -> int:
    from campaign.aggregate.auto import aggregate

    try:
        triples = read_labels(Path(args.labels))
    except LabelsError as exc:
        for p in exc.problems:
            print(p, file=sys.stderr)
        return 2
    bar = bar_on_terminal("aggregating")
    try:
        items, competence, method, evidence = aggregate(triples, args.method, seed=args.seed,
                                                        progress=bar.update if bar else None)
    finally:
        if bar is not None:
            bar.close()
    counts: dict[str, int] = {}
    for _, w, _ in triples:
        counts[w] = counts.get(w, 0) + 1
    workers: dict[str, dict[str, float | int | None]] = {
        w: {"competence": _finite(competence.get(w)), "labels": counts[w]} for w in sorted(counts)}
    out = {"method": method, "requested": args.method, "items": {str(k): str(v) for k, v in sorted(items.items())},
           "workers": workers, "evidence": evidence, "labels": len(triples)}
    if args.json:
        print(dumps(out))
        return 0
    why = f" ({evidence['reason']})" if evidence.get("reason") else ""
    print(f"method: {method}{why}")
    print(f"{len(items)} items, {len(workers)} workers, {len(triples)} labels")
    # the file's own text (items, labels, worker ids, maybe a worker's words) reaches the terminal inert
    print("\nitem\tlabel")
    for k, v in out["items"].items():
        print(f"{inert(k)}\t{inert(v)}")
    print("\nworker\tcompetence\tlabels")
    for w, d in sorted(workers.items(), key=lambda kv: (-(kv[1]["competence"] or 0.0), kv[0])):
        c = d["competence"]
        print(f"{inert(w)}\t{'-' if c is None else f'{c:.4f}'}\t{d['labels']}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `aggregate` to the `campaign` command line (listed in `campaign.commands.COMMAND_MODULES`)."""
    p = subparsers.add_parser("aggregate", help="aggregate a crowd labels file (item, worker, label) with the project's methods")
    p.add_argument("labels", help="TSV file with a header naming columns item, worker, label (e.g. `campaign export NAME "
                                  "--answers`: only its kept rows are read)")
    p.add_argument("--method", choices=METHODS, default="auto",
                   help="auto (default): majority vote unless a model predicts held-back labels better over 5 "
                        "folds (by 2 standard errors) and its restarts agree (docs/aggregation.md)")
    p.add_argument("--seed", type=argtypes.seed, default=0, help="seeds MACE's and Dawid-Skene's restarts and the held-back labels")
    p.add_argument("--json", action="store_true", help="print one JSON object: method, items, workers, evidence")
    p.set_defaults(func=run)
