"""One definition of each quality and activity figure, shared by the dashboard, `campaign status` and
the report, so two screens never show the same label with two values.

- agreement `r`: each worker's correlation with the rest (from their evidence), weighted by the
  worker's labels, over the workers that have one;
- labels excluded: labels quality control set aside, of all labels, as `n/N (p%)`;
- activity: answers collected in the last hour of the campaign's clock, and the workers who gave them
  (the same window for both, so "0 answers/h" never stands beside "51 workers active").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

HOUR = 3600.0


def weighted_agreement(evidence: Iterable[Mapping[str, Any]]) -> float | None:
    """Label-weighted mean of the workers' `correlation`; None when no worker has one."""
    pairs = [(float(e["correlation"]), int(e.get("labels") or 0)) for e in evidence if e.get("correlation") is not None]
    total = sum(n for _, n in pairs)
    return sum(r * n for r, n in pairs) / total if total else None


def trap_pass_rate(evidence: Iterable[Mapping[str, Any]]) -> float | None:
    """Traps passed over traps seen, summed over the workers; None before any trap was seen."""
    evs = list(evidence)
    seen = sum(int(e.get("traps_seen") or 0) for e in evs)
    return sum(int(e.get("traps_passed") or 0) for e in evs) / seen if seen else None


def weighted_agreement_of(correlation: np.ndarray, labels: np.ndarray) -> float | None:
    """`weighted_agreement` over columns (a worker's `correlation`, NaN where they have none, and their
    `labels`): what a Reader kept for a run computes from `EvidenceColumns`."""
    known = ~np.isnan(correlation)
    total = int(labels[known].sum())
    return float((correlation[known] * labels[known]).sum()) / total if total else None


def trap_pass_rate_of(seen: np.ndarray, passed: np.ndarray) -> float | None:
    """`trap_pass_rate` over columns of traps seen and passed."""
    total = int(seen.sum())
    return int(passed.sum()) / total if total else None


def excluded_share(labels: int, excluded: int) -> float | None:
    return excluded / labels if labels else None


def excluded_text(labels: int, excluded: int) -> str:
    """'30/300 (10%)': the count and the share, one wording wherever it is shown."""
    share = excluded_share(labels, excluded)
    return f"{excluded}/{labels}" + (f" ({share:.0%})" if share is not None else "")


def last_hour(times: Iterable[float], workers: Iterable[str], now: float) -> tuple[int, set[str]]:
    """(answers collected in the hour before `now`, the workers who gave them)."""
    count, active = 0, set()
    for t, w in zip(times, workers):
        if now - HOUR <= t <= now:
            count += 1
            active.add(w)
    return count, active


def cancel_waiting(open_hits: int, pending_review: int) -> str:
    """What a cancelling campaign still waits for, in words: its expired HITs stay open until the
    workers who accepted them before the cancel submit (or their time runs out), and submitted answers
    are still reviewed and paid."""
    parts = []
    if open_hits:
        parts.append(f"{open_hits} HIT{'s' if open_hits != 1 else ''} a worker accepted before the cancel "
                     "(closed when the answer arrives or its time runs out)")
    if pending_review:
        parts.append(f"{pending_review} submitted answer{'s' if pending_review != 1 else ''} to review")
    return "waiting for " + " and ".join(parts) if parts else "releasing the reservations on the next tick"


def worker_figure(evidence: Iterable[Mapping[str, Any] | None]) -> tuple[str, str, str]:
    """(evidence key, column heading, note) for the per-worker quality column of the workers views.

    `r` (labels vs the other workers') where quality control computed one; else MACE's competence, which
    the nugget kind's aggregation gives each worker (the share of marks made by knowing rather than at
    random); else `r` with a note saying why it is empty.
    """
    evs = [e or {} for e in evidence]
    if any(e.get("correlation") is not None for e in evs):
        return "correlation", "r", ""
    if any(e.get("competence") is not None for e in evs):
        return "competence", "MACE", ("MACE: each worker's competence from the aggregation (0-1: the share of marks "
                                      "made by knowing rather than at random); nugget marks get no r")
    return "correlation", "r", "r: none yet (a worker needs labels on 3 or more items other workers also labelled)"
