"""One daemon per SQLite state directory; the lock dies with its process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from campaign.runlock import AlreadyRunning, state_lock
from tests.support.cli import clean_env
from tests.support.paths import ROOT

HOLD = "import sys, time; from pathlib import Path; from campaign.runlock import state_lock\n" \
       "with state_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)\n"


def test_second_daemon_refused_naming_the_first_and_lock_freed_by_sigkill(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(AlreadyRunning) as refused:
            with state_lock(tmp_path):
                pass
        assert f"pid {holder.pid}" in str(refused.value) and str(tmp_path) in str(refused.value)
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    deadline = time.monotonic() + 5
    while True:
        try:
            with state_lock(tmp_path):
                break
        except AlreadyRunning:
            assert time.monotonic() < deadline, "lock not released after SIGKILL"
            time.sleep(0.05)
