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


@dataclass(frozen=True)
class RankedArgument:
    arg_id: str
    score: float  # the published graph-based convincingness (UKPConvArgRank); higher = more convincing
    text: str


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


def load_ranking() -> dict[str, list[RankedArgument]]:
    """UKPConvArgRank per debate side (file stem, e.g. `evolution-vs-creation_creation`), in file order.

    The arguments' text is HTML as scraped (`<br/>` kept): it is shown to workers, never parsed here.
    """
    base = require_shared_data("ukpconvarg1") / "ranking"
    out: dict[str, list[RankedArgument]] = {}
    for path in sorted(base.glob("*.csv")):
        rows = []
        with path.open(encoding="utf-8", newline="") as fh:
            for line in fh:
                line = line.rstrip("\r\n")
                if not line or line.startswith("#"):
                    continue
                arg_id, score, text = line.split("\t", 2)
                rows.append(RankedArgument(arg_id=arg_id, score=float(score), text=text))
        out[path.stem] = rows
    return out
