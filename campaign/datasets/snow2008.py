"""Snow et al. (2008) worker labels with gold, as (item, worker, label) triples."""

from __future__ import annotations

import csv

from campaign.paths import require_shared_data

TASKS = {"rte": "rte", "temp": "temp", "wsd": "wsd"}


def load(task: str) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """Labels and gold keys of one of `rte`, `temp`, `wsd` (the standardized files, with worker ids)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    path = require_shared_data("snow2008") / "standardized" / f"{TASKS[task]}.standardized.tsv"
    labels, gold = [], {}
    with path.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            labels.append((row["orig_id"], row["!amt_worker_ids"], row["response"]))
            gold[row["orig_id"]] = row["gold"]
    return labels, gold
