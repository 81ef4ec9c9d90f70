"""Scale-out: one daemon per SQLite state directory, enforced between real `campaign run` processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.test_e2e import ROOT, write_spec


def _run_cmd(config: Path, state: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "campaign", "run", "--config", str(config), "--state", str(state), "--seed", "3",
            "--quiet", *extra]


def test_a_second_daemon_on_one_sqlite_state_refuses_naming_the_first(tmp_path: Path) -> None:
    config = write_spec(tmp_path)
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k != "CAMPAIGN_TEST_CRASH"}
    first = subprocess.Popen(_run_cmd(config, state), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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
        second = subprocess.run(_run_cmd(config, state), cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, second.stderr
        assert f"another campaign daemon (pid {first.pid} on " in second.stderr
        assert str(state) in second.stderr and "--db" in second.stderr
        assert time.monotonic() - t0 < 30  # refused at once, not after waiting
        assert first.poll() is None, "the refused daemon disturbed the first"
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)
    # the lock goes with its process: a new daemon starts (and resumes) once the first has stopped
    proc = subprocess.run(_run_cmd(config, state), cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
