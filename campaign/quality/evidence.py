"""Evidence about workers, from their labels alone: trap results, worker-rest correlation, constancy,
and the campaign-level "meta-workers" agreement of seed 000. Pure functions; the review policy
(`campaign.quality.review`) turns the evidence into decisions.

Worker-rest correlation (seed 000 §4.2, after Snow et al. 2008): a worker's Likert scores against the
mean of the *other* workers on the same items. It is blind to a worker's scale (a lenient or harsh but
attentive worker correlates well), and a worker who answers at random correlates near zero.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)  # one per label: hundreds of thousands at the seed's scale
class Label:
    item: str
    worker: str
    assignment: str
    value: float


@dataclass(frozen=True, slots=True)  # one per label: hundreds of thousands at the seed's scale
class TrapResult:
    worker: str
    assignment: str
    item: str
    value: float
    passed: bool


@dataclass(frozen=True, slots=True)  # slots: a daemon keeps one per worker and campaign (a stage's parsed review)
class WorkerEvidence:
    worker: str
    labels: int
    shared_items: int
    correlation: float | None  # None until `min_shared` items are shared with other workers
    traps_seen: int
    traps_passed: int
    constant: bool  # every label the same value (over enough labels to mean something)
    competence: float | None = None  # e.g. MACE, where the task has it

    @property
    def trap_pass_rate(self) -> float | None:
        return self.traps_passed / self.traps_seen if self.traps_seen else None

    def as_dict(self) -> dict:
        return {"labels": self.labels, "shared_items": self.shared_items,
                "correlation": None if self.correlation is None else round(self.correlation, 4),
                "traps_seen": self.traps_seen, "traps_passed": self.traps_passed, "constant": self.constant,
                **({"competence": round(self.competence, 4)} if self.competence is not None else {})}


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r, or None when either side has no variance (r is undefined there)."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def worker_rest(labels: Iterable[Label], min_shared: int) -> dict[str, tuple[float | None, int]]:
    """Per worker: (correlation with the mean of the others on shared items, number of shared items).

    The correlation is None below `min_shared` shared items. A worker with constant labels has no
    variance: their correlation counts as 0.0 (they carry no information about the order of items).
    """
    by_item: dict[str, list[Label]] = defaultdict(list)
    for lab in labels:
        by_item[lab.item].append(lab)
    pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for item in sorted(by_item):
        labs = by_item[item]
        for l in labs:
            others = [o.value for o in labs if o.worker != l.worker]
            if others:
                pairs[l.worker].append((l.value, sum(others) / len(others)))
    out: dict[str, tuple[float | None, int]] = {}
    workers = {l.worker for labs in by_item.values() for l in labs}
    for w in sorted(workers):
        ps = pairs.get(w, [])
        if len(ps) < min_shared:
            out[w] = (None, len(ps))
            continue
        r = pearson([p[0] for p in ps], [p[1] for p in ps])
        out[w] = (0.0 if r is None else r, len(ps))
    return out


def meta_worker_agreement(labels: Iterable[Label], k: int = 5) -> float | None:
    """Seed 000's agreement figure: sort each item's labels into `k` meta-workers (lowest label = meta-
    worker 1, ...), then average each meta-worker's Pearson correlation with the mean of the other k-1
    over items. Items with fewer than `k` labels are left out."""
    by_item: dict[str, list[float]] = defaultdict(list)
    for lab in labels:
        by_item[lab.item].append(lab.value)
    rows = [sorted(v)[:k] for _, v in sorted(by_item.items()) if len(v) >= k]
    if len(rows) < 3:
        return None
    rs = []
    for m in range(k):
        mine = [r[m] for r in rows]
        rest = [(sum(r) - r[m]) / (k - 1) for r in rows]
        r = pearson(mine, rest)
        if r is not None:
            rs.append(r)
    return sum(rs) / len(rs) if rs else None


def constant_answers(labels: int, distinct: int, min_shared: int) -> bool:
    """Every label the same value, over enough labels to mean something."""
    return labels >= max(min_shared, 2) and distinct == 1


def gather(labels: Sequence[Label], traps: Sequence[TrapResult], min_shared: int,
           competence: Mapping[str, float] | None = None) -> dict[str, WorkerEvidence]:
    """Everything known about each worker who left a label or met a trap."""
    rest = worker_rest(labels, min_shared)
    by_worker: dict[str, list[float]] = defaultdict(list)
    for l in labels:
        by_worker[l.worker].append(l.value)
    seen: dict[str, int] = defaultdict(int)
    passed: dict[str, int] = defaultdict(int)
    for t in traps:
        seen[t.worker] += 1
        passed[t.worker] += int(t.passed)
    out = {}
    for w in sorted(set(by_worker) | set(seen)):
        values = by_worker.get(w, [])
        r, shared = rest.get(w, (None, 0))
        out[w] = WorkerEvidence(worker=w, labels=len(values), shared_items=shared, correlation=r, traps_seen=seen[w],
                                traps_passed=passed[w], constant=constant_answers(len(values), len(set(values)), min_shared),
                                competence=(competence or {}).get(w))
    return out
