"""Shared by the tests of the daemon's helper processes (crowd, marketplace): whether one still runs."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes (its parent is gone, init reaps it)
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def child_dies_with(daemon: subprocess.Popen, seconds: float = 30.0) -> bool:
    """SIGKILL `daemon`, whose first stdout line is its child's pid; whether the child is gone within
    `seconds` (it must not outlive the daemon)."""
    assert daemon.stdout is not None
    pid = int(daemon.stdout.readline())
    assert alive(pid)
    daemon.send_signal(signal.SIGKILL)
    daemon.wait(timeout=60)
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)
