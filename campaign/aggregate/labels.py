"""A crowd labels file: tab-separated, a header naming the columns `item`, `worker` and `label` (in any
order; other columns are ignored), as `campaign export NAME --answers` writes it or another platform
gives it. Two more columns are understood: `kept` (`false`: a label that does not count, e.g. a trap,
excluded or rejected work, which is left out) and `assignment` (a worker may label an item once per
assignment; a label given on several rows of one assignment is one label). Every problem is reported
as `file:line: message`, all of them before anything is used: a silently skipped row would change the
answer.
"""

from __future__ import annotations

import csv
from pathlib import Path

REQUIRED = ("item", "worker", "label")
FALSE = frozenset({"false", "0", "no"})


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
