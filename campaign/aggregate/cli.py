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
import csv
import math
import sys
from pathlib import Path

from campaign.jsonout import dumps

REQUIRED = ("item", "worker", "label")
FALSE = frozenset({"false", "0", "no"})
METHODS = ("auto", "majority", "mace", "ds")  # = campaign.aggregate.auto.METHODS, without importing NumPy for every command


class LabelsError(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def read_labels(path: Path, max_problems: int = 20) -> list[tuple[str, str, str]]:
    """(item, worker, label) triples from a TSV file; raises LabelsError with every problem found."""
    if not path.is_file():
        raise LabelsError([f"{path}: no such file"])
    problems: list[str] = []
    triples: list[tuple[str, str, str]] = []
    first_seen: dict[tuple[str, str], int] = {}
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
            header = next(reader, None)
            if header is None:
                raise LabelsError([f"{path}:1: the file is empty; expected a header with columns item, worker, label"])
            names = [h.strip().lower() for h in header]
            missing = [c for c in REQUIRED if c not in names]
            if missing:
                raise LabelsError([f"{path}:1: header lacks column(s) {', '.join(missing)} (found: {', '.join(header) or 'nothing'}); "
                                   "expected tab-separated columns item, worker, label"])
            col = {c: names.index(c) for c in REQUIRED}
            kept_at = names.index("kept") if "kept" in names else None
            assignment_at = names.index("assignment") if "assignment" in names else None
            labels_of: dict[tuple[str, str, str], str] = {}
            for row in reader:
                line = reader.line_num
                if not row or all(not c.strip() for c in row):
                    continue
                if len(row) != len(header):
                    problems.append(f"{path}:{line}: {len(row)} field(s), the header has {len(header)} (fields are tab-separated)")
                elif kept_at is not None and row[kept_at].strip().lower() in FALSE:
                    continue
                else:
                    item, worker, label = (row[col[c]].strip() for c in REQUIRED)
                    empty = [c for c, v in zip(REQUIRED, (item, worker, label)) if not v]
                    answer = (item, worker, row[assignment_at].strip()) if assignment_at is not None else None
                    if empty:
                        problems.append(f"{path}:{line}: empty {', '.join(empty)}")
                    elif answer is not None:
                        before = labels_of.get(answer)
                        if before is None:
                            labels_of[answer] = label
                            first_seen.setdefault((item, worker), line)
                            triples.append((item, worker, label))
                        elif before != label:
                            problems.append(f"{path}:{line}: worker {worker!r} labelled item {item!r} {before!r} and "
                                            f"{label!r} in one assignment ({answer[2]!r})")
                    elif (item, worker) in first_seen:
                        problems.append(f"{path}:{line}: worker {worker!r} already labelled item {item!r} "
                                        f"(line {first_seen[(item, worker)]})")
                    else:
                        first_seen[(item, worker)] = line
                        triples.append((item, worker, label))
                if len(problems) >= max_problems:
                    problems.append(f"{path}: stopped after {max_problems} problems")
                    break
    except UnicodeDecodeError as exc:
        raise LabelsError([f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"]) from None
    if not problems and not triples:
        problems.append(f"{path}:2: no labels after the header")
    if problems:
        raise LabelsError(problems)
    return triples


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
    items, competence, method, evidence = aggregate(triples, args.method, seed=args.seed)
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
    print("\nitem\tlabel")
    for k, v in out["items"].items():
        print(f"{k}\t{v}")
    print("\nworker\tcompetence\tlabels")
    for w, d in sorted(workers.items(), key=lambda kv: (-(kv[1]["competence"] or 0.0), kv[0])):
        c = d["competence"]
        print(f"{w}\t{'-' if c is None else f'{c:.4f}'}\t{d['labels']}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `aggregate` to the `campaign` command line (listed in `campaign.commands.COMMAND_MODULES`)."""
    p = subparsers.add_parser("aggregate", help="aggregate a crowd labels file (item, worker, label) with the project's methods")
    p.add_argument("labels", help="TSV file with a header naming columns item, worker, label (e.g. `campaign export NAME "
                                  "--answers`: only its kept rows are read)")
    p.add_argument("--method", choices=METHODS, default="auto",
                   help="auto (default): majority vote unless a model predicts held-back labels better over 5 "
                        "folds (by 2 standard errors) and its restarts agree (docs/aggregation.md)")
    p.add_argument("--seed", type=int, default=0, help="seeds MACE's and Dawid-Skene's restarts and the held-back labels")
    p.add_argument("--json", action="store_true", help="print one JSON object: method, items, workers, evidence")
    p.set_defaults(func=run)
