"""UKPConvArg1's pairwise worker judgements with the published MACE gold labels and competences."""

from __future__ import annotations

import csv
import gzip
from dataclasses import dataclass

from campaign.paths import require_shared_data


@dataclass(frozen=True)
class Judgements:
    labels: list[tuple[str, str, str]]  # (pair id, worker, a1|a2|equal)
    gold: dict[str, str]  # published MACE gold label, for the 16,081 labelled pairs
    competence: dict[str, float]  # published MACE competence per worker


def load() -> Judgements:
    path = require_shared_data("ukpconvarg1") / "ukpconvarg1_full_worker_labels.tsv.gz"
    labels, gold, comp = [], {}, {}
    with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            pair = f"{row['topic']}/{row['pair_id']}"
            labels.append((pair, row["turk_id"], row["value"]))
            if row["gold_label"]:
                gold[pair] = row["gold_label"]
            comp[row["turk_id"]] = float(row["turk_competence"])
    return Judgements(labels=labels, gold=gold, competence=comp)
