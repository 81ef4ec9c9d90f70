"""The emulator standalone (`campaign prolific serve`) as a subprocess, for tests of the real road:
started, its URL and token read from what it prints, stopped; and the research-API exchanges it
recorded (`--record-exchanges`) checked against Prolific's API description afterwards."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from campaign.child_process import end
from campaign.prolific.serve import EXCHANGES
from tests.prolific.contract import Contract, contract, find_spec
from tests.support.cli import clean_env, start_campaign


@contextmanager
def standalone_emulator(state: Path, *extra: str, log: IO[str] | None = None) -> Iterator[dict[str, str]]:
    """`campaign prolific serve --port 0 --state STATE --record-exchanges EXTRA`; yields
    {"PROLIFIC_BASE_URL": ..., "PROLIFIC_TOKEN": ...} as it printed them, and stops it (SIGTERM) after."""
    proc = start_campaign("prolific", "serve", "--port", "0", "--state", str(state), "--record-exchanges", *extra,
                          env=clean_env(["PROLIFIC_*"]), stdout=subprocess.PIPE, stderr=log or subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        found: dict[str, str] = {}
        for _ in range(5):
            line = proc.stdout.readline()
            if not line:
                break
            key, sep, value = line.strip().partition("=")
            if sep and key in ("PROLIFIC_BASE_URL", "PROLIFIC_TOKEN"):
                found[key] = value
            if len(found) == 2:
                break
        assert len(found) == 2, f"`campaign prolific serve` printed no URL and token (exit {proc.poll()})"
        yield found
    finally:
        end(proc, grace=60)  # and its stdout closed


def checked_exchanges(state: Path) -> Contract | None:
    """Every request and answer the emulator recorded, checked against the description (None where the
    description is absent: the caller says so, the rest of its test still runs)."""
    if find_spec() is None:
        return None
    c = contract()
    with (state / EXCHANGES).open(encoding="utf-8") as f:
        for line in f:
            x = json.loads(line)
            c.check(x["method"], x["path"], x["body"], int(x["status"]), x["answer"], x["query"])
    return c
