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
    value = _whole(text, "a seed")
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"a seed is from 0 to {MAX_SEED}, got {value}")
    return value


def seeds(text: str) -> list[int]:
    """`1,2,3`: each a `seed`, at least one."""
    out = [seed(s.strip()) for s in text.split(",") if s.strip()]
    if not out:
        raise argparse.ArgumentTypeError("give at least one seed, e.g. 1,2,3")
    return out


def port(text: str) -> int:
    """A TCP port, 0 to 65535 (0: any free port)."""
    value = _whole(text, "a port")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is from 0 to 65535 (0: any free one), got {value}")
    return value


def count(text: str) -> int:
    """A whole number >= 0."""
    value = _whole(text, "a count")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive(text: str) -> int:
    """A whole number >= 1."""
    value = _whole(text, "a count")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def percent(text: str) -> int:
    """A whole percentage, 0 to 100."""
    value = _whole(text, "a percentage")
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"a percentage is from 0 to 100, got {value}")
    return value
