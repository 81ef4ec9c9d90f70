"""Seeded randomness that is stable across processes: planning, trap placement and the simulated crowd
all derive their generators from named parts, so the same spec and seed plan the same HITs anywhere.

Lives outside `campaign.crowd` because production code (planning) needs it and must never import the
simulated crowd.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np


def stable_seed(*parts: object) -> int:
    """A 64-bit seed from any parts, stable across processes (unlike hash())."""
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big")


def stable_seeds(parts: Sequence[object], lasts: Iterable[object]) -> list[int]:
    """`stable_seed(*parts, last)` for each of `lasts`, the shared parts hashed once: the simulated crowd
    orders every worker for each HIT it fills, and one full hash a worker was a third of its CPU at
    470,000 propositions."""
    if not parts:
        return [stable_seed(last) for last in lasts]
    base = hashlib.sha256(("\x1f".join(str(p) for p in parts) + "\x1f").encode("utf-8"))
    out = []
    for last in lasts:
        h = base.copy()
        h.update(str(last).encode("utf-8"))
        out.append(int.from_bytes(h.digest()[:8], "big"))
    return out


def rng_for(*parts: object) -> np.random.Generator:
    return np.random.default_rng(stable_seed(*parts))
