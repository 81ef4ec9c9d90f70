"""Seeded randomness that is stable across processes: planning, trap placement and the simulated crowd
all derive their generators from named parts, so the same spec and seed plan the same HITs anywhere.

Lives outside `campaign.crowd` because production code (planning) needs it and must never import the
simulated crowd.
"""

from __future__ import annotations

import hashlib

import numpy as np


def stable_seed(*parts: object) -> int:
    """A 64-bit seed from any parts, stable across processes (unlike hash())."""
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big")


def rng_for(*parts: object) -> np.random.Generator:
    return np.random.default_rng(stable_seed(*parts))
