"""Waiting in tests for something another thread or process does: poll, with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(cond: Callable[[], T], timeout: float = 60.0, poll: float = 0.05) -> T:
    """Call `cond` every `poll` seconds until it returns something true, and return that; AssertionError
    once `timeout` seconds have passed without."""
    end = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting ({timeout} s)")
        time.sleep(poll)
