"""Campaign commands (run, validate, status, ...): filled in by the end-to-end skeleton."""

from __future__ import annotations

from typing import Sequence


def main(argv: Sequence[str]) -> int:
    print("campaign: commands are being built; try 'campaign bench' or 'campaign market serve'")
    return 2
