"""Scale-out: one daemon per SQLite state directory, enforced between real `campaign run` processes."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.cli import run_args, run_campaign, start_campaign
from tests.test_e2e import write_spec


@pytest.mark.slow
def test_a_second_daemon_on_one_sqlite_state_refuses_naming_the_first(tmp_path: Path) -> None:
    config = write_spec(tmp_path)
    state = tmp_path / "state"
    run = run_args(config, state, seed=3)
    first = start_campaign(*run, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        lock = state / "daemon.lock"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the first daemon has the lock once it wrote its pid there
            if lock.is_file() and lock.read_text(encoding="utf-8").strip():
                break
            time.sleep(0.1)
        assert json.loads(lock.read_text(encoding="utf-8"))["pid"] == first.pid
        assert first.poll() is None, "the first daemon ended before the second started"
        t0 = time.monotonic()
        second = run_campaign(*run, timeout=60)
        assert second.returncode == 2, second.stderr
        assert f"another campaign daemon (pid {first.pid} on " in second.stderr
        assert str(state) in second.stderr and "--db" in second.stderr
        assert time.monotonic() - t0 < 30  # refused at once, not after waiting
        assert first.poll() is None, "the refused daemon disturbed the first"
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)
    # the lock goes with its process: a new daemon starts (and resumes) once the first has stopped
    proc = run_campaign(*run, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
