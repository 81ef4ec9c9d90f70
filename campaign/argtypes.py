"""argparse types for the command line's numbers: each refuses, with the option's name and a reason,
what the code behind it cannot take, before anything is started or written.

Why a module of their own: an out-of-range value used to surface deep inside (a port as
`OverflowError` from `bind()` after the state folder was made, a negative seed as a finish step failing
every pass, a negative `--limit` as no limit on SQLite and an error on PostgreSQL)."""

from __future__ import annotations

import argparse

MAX_SEED = 2**63 - 1  # a seed is stored with its campaign in a signed 64-bit column


def _whole(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} is a whole number, not {text[:40]!r}") from None


def seed(text: str) -> int:
    """A whole number from 0 to MAX_SEED. numpy's generators refuse a negative seed: a campaign run with
    one stored it and failed its finish step (the nugget export's MACE) on every pass, never finishing."""
    return _between(text, "a seed", 0, MAX_SEED)


def seeds(text: str) -> list[int]:
    """`1,2,3`: each a `seed`, at least one."""
    out = [seed(s.strip()) for s in text.split(",") if s.strip()]
    if not out:
        raise argparse.ArgumentTypeError("give at least one seed, e.g. 1,2,3")
    return out


def _between(text: str, what: str, lo: int, hi: int, note: str = "") -> int:
    value = _whole(text, what)
    if not lo <= value <= hi:
        raise argparse.ArgumentTypeError(f"{what} is from {lo} to {hi}{note}, got {value}")
    return value


def port(text: str) -> int:
    """A TCP port, 0 to 65535 (0: any free port)."""
    return _between(text, "a port", 0, 65535, " (0: any free one)")


def _at_least(text: str, lo: int) -> int:
    value = _whole(text, "a count")
    if value < lo:
        raise argparse.ArgumentTypeError(f"must be {lo} or more, got {value}")
    return value


def count(text: str) -> int:
    """A whole number >= 0."""
    return _at_least(text, 0)


def positive(text: str) -> int:
    """A whole number >= 1."""
    return _at_least(text, 1)


def percent(text: str) -> int:
    """A whole percentage, 0 to 100."""
    return _between(text, "a percentage", 0, 100)
