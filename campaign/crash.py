"""Crash points for the crash tests (DESIGN invariant 1): a named place in the code where a test may kill
the process as `kill -9` would, between a remote call and the store write that records it.

`CAMPAIGN_TEST_CRASH=<point>[:<n>]` kills the process the n-th time (default the first) it reaches
`crash_point("<point>")`; unset, a crash point does nothing. A leaf: any layer may mark its points.
"""

from __future__ import annotations

import os
import signal
import threading

_crash_counts: dict[str, int] = {}
_crash_lock = threading.Lock()


def crash_point(name: str) -> None:
    """Die here (SIGKILL, no cleanup) if CAMPAIGN_TEST_CRASH names this point and its count is reached."""
    spec = os.environ.get("CAMPAIGN_TEST_CRASH")
    if not spec:
        return
    point, _, count = spec.partition(":")
    if point != name:
        return
    with _crash_lock:
        _crash_counts[name] = _crash_counts.get(name, 0) + 1
        if _crash_counts[name] >= int(count or 1):
            os.kill(os.getpid(), signal.SIGKILL)
