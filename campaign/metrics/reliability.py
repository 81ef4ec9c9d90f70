"""Test-retest reliability of a stage: a sample of its HITs is done a second time by other workers, and
the per-item mean of the first pass is correlated with the per-item mean of the repeat pass.

Seed 000 (Falke et al. 2017, §4 and §5.3) measured reliability this way: "simply repeated the
crowdsourcing" for some topics and correlated the importance estimates of both runs (Pearson .82 on
TAC for Likert, .73 on the educational corpus). Here the repeat is a seeded random share of a stage's
HITs rather than whole topics, so a campaign pays for only that share.

Pure: no store, no marketplace. The repeat HITs are told apart by their key (`REPEAT_PREFIX`), so every
step that keeps the two passes apart needs nothing but the key.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from campaign.state import HitKeys

REPEAT_PREFIX = HitKeys.REPEAT


def repeat_key(hit_key: str) -> str:
    """The key of the repeat of first-pass HIT `hit_key`."""
    return f"{REPEAT_PREFIX}{hit_key}"


def is_repeat(hit_key: str) -> bool:
    return hit_key.startswith(REPEAT_PREFIX)


def original_key(hit_key: str) -> str:
    """The first-pass HIT a repeat HIT repeats (a first-pass key is returned unchanged)."""
    return hit_key[len(REPEAT_PREFIX):] if is_repeat(hit_key) else hit_key


def sample_size(n_hits: int, share: float) -> int:
    """How many of `n_hits` HITs a repeat of `share` re-posts: rounded half up, at least one when the
    share is positive (a share too small for one HIT would otherwise measure nothing)."""
    if n_hits <= 0 or share <= 0:
        return 0
    return min(n_hits, max(1, math.floor(share * n_hits + 0.5)))


def sample_hits(hit_keys: Iterable[str], share: float, seed: int, stage: str) -> list[str]:
    """The first-pass HITs to repeat: a random sample fixed by the campaign's seed and the stage name, so
    a restarted daemon (or a second run of the same spec) picks the same HITs. Returned sorted."""
    keys = sorted({k for k in hit_keys if not is_repeat(k)})
    k = sample_size(len(keys), share)
    rng = random.Random(f"{seed}|repeat|{stage}")
    return sorted(rng.sample(keys, k))


@dataclass(frozen=True)
class Retest:
    """The test-retest figures of one stage. `pearson`/`spearman` are None below 3 items or when one
    pass gives every item the same mean (the correlation is undefined then, not zero)."""

    items: int
    pearson: float | None
    spearman: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        return {"items": self.items,
                "pearson": None if self.pearson is None else round(self.pearson, 4),
                "spearman": None if self.spearman is None else round(self.spearman, 4)}


def item_means(judgments: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Per-item mean of (item, value) judgments."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for item, value in judgments:
        sums[item] = sums.get(item, 0.0) + float(value)
        counts[item] = counts.get(item, 0) + 1
    return {item: sums[item] / counts[item] for item in sums}


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    n = len(x)
    if n != len(y):
        raise ValueError(f"pearson needs paired values, got {n} and {len(y)}")
    if n < 3:
        return None
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx <= 0 or syy <= 0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def _ranks(x: Sequence[float]) -> list[float]:
    """Ranks from 1, ties given their average rank (as Spearman's rho with ties needs)."""
    order = sorted(range(len(x)), key=lambda i: x[i])
    ranks = [0.0] * len(x)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    return pearson(_ranks(x), _ranks(y))


def retest_correlation(first: Iterable[tuple[str, float]], repeat: Iterable[tuple[str, float]]) -> Retest:
    """Pearson (and Spearman) of the per-item mean of the first pass against the repeat pass, over the
    items judged in both. `first` and `repeat` are (item, value) judgments: the ones that count (approved,
    not excluded by quality control), traps left out by the caller."""
    a, b = item_means(first), item_means(repeat)
    common = sorted(set(a) & set(b))
    x = [a[i] for i in common]
    y = [b[i] for i in common]
    return Retest(items=len(common), pearson=pearson(x, y), spearman=spearman(x, y))

