"""Snow et al. (2008) worker labels with gold: the standardized release (worker and item ids) as
(item, worker, label) triples, and the copies MACE's own tests use (dense CSV + key file)."""

from __future__ import annotations

import csv
from dataclasses import dataclass

import numpy as np

from campaign.paths import require_shared_data

TASKS = {"rte": "rte", "temp": "temp", "wsd": "wsd"}
# Numeric rating tasks: affect ratings of 100 headlines (0-100; valence -100..100) and 30 wordsim pairs (0-10).
NUMERIC = ("anger", "disgust", "fear", "joy", "sadness", "surprise", "valence", "wordsim")
MACE_FORMAT = {"rte": "rte", "temp": "temporal", "wsd": "wsd"}


def _check(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")


def load(task: str) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """Labels and gold keys of one of `rte`, `temp`, `wsd` (the standardized files, with worker ids)."""
    _check(task)
    path = require_shared_data("snow2008") / "standardized" / f"{TASKS[task]}.standardized.tsv"
    labels, gold = [], {}
    with path.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            labels.append((row["orig_id"], row["!amt_worker_ids"], row["response"]))
            gold[row["orig_id"]] = row["gold"]
    return labels, gold


@dataclass(frozen=True)
class Rating:
    item: str
    worker: str
    assignment: str
    value: float


def load_numeric(task: str) -> tuple[list[Rating], dict[str, float]]:
    """Ratings and the expert gold score per item of one of `NUMERIC` (the standardized files)."""
    if task not in NUMERIC:
        raise ValueError(f"unknown numeric task {task!r}; choose one of {', '.join(NUMERIC)}")
    path = require_shared_data("snow2008") / "standardized" / f"{task}.standardized.tsv"
    ratings, gold = [], {}
    with path.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            ratings.append(Rating(row["orig_id"], row["!amt_worker_ids"], row["!amt_annotation_ids"], float(row["response"])))
            gold[row["orig_id"]] = float(row["gold"])
    return ratings, gold


def load_mace_format(task: str) -> tuple[np.ndarray, dict[int, str]]:
    """The items x annotators string matrix ("" = no label) and gold by row number, as MACE's tests
    ship them: the same labels as `load` without worker ids, which lets the two inputs be compared."""
    _check(task)
    base = require_shared_data("snow2008") / "mace-format"
    with (base / f"{MACE_FORMAT[task]}.csv").open(encoding="utf-8", newline="") as fh:
        rows = [[c.strip() for c in r] for r in csv.reader(fh) if r]
    width = max(len(r) for r in rows)
    matrix = np.array([r + [""] * (width - len(r)) for r in rows], dtype=object)
    keys = [k.strip() for k in (base / f"{MACE_FORMAT[task]}.key").read_text(encoding="utf-8").splitlines() if k.strip()]
    if len(keys) != len(rows):
        raise ValueError(f"{task}: {len(rows)} items but {len(keys)} gold keys")
    return matrix, dict(enumerate(keys))
