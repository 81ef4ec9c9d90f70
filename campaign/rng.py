"""Seeded randomness that is stable across processes: planning, trap placement and the simulated crowd
all derive their generators from named parts, so the same spec and seed plan the same HITs anywhere.

Lives outside `campaign.crowd` because production code (planning) needs it and must never import the
simulated crowd.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np

MAX_SEED = 2**63 - 1  # a seed is stored with its campaign in a signed 64-bit column


def seed_arg(text: str) -> int:
    """An argparse type for `--seed`: a whole number from 0 to MAX_SEED. Why: numpy's generators refuse a
    negative seed, and a campaign run with one stored it and failed its finish step on every pass (the
    nugget export's MACE), so it never finished and `campaign simulate` never returned."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a seed is a whole number, not {text[:40]!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"a seed is from 0 to {MAX_SEED}, got {value}")
    return value


def seed_list(text: str) -> list[int]:
    """An argparse type for `--seeds 1,2,3`: each a `seed_arg`, at least one."""
    import argparse

    seeds = [seed_arg(s.strip()) for s in text.split(",") if s.strip()]
    if not seeds:
        raise argparse.ArgumentTypeError("give at least one seed, e.g. 1,2,3")
    return seeds


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
