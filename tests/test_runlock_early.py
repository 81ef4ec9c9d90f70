"""`campaign run` refuses a state directory another daemon holds before loading anything heavy, and a
`--campaign` name the spec does not have leaves no state directory (and no `daemon.lock`) behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from campaign.runlock import refuse_early, state_lock
from tests.support.cli import clean_env, cli_output
from tests.support.paths import ROOT

PROBE = """
import sys
from campaign.cli import main
code = main(sys.argv[1:])
print("heavy:", sorted(m for m in ("sqlmodel", "sqlalchemy", "campaign.daemon", "campaign.spec") if m in sys.modules))
raise SystemExit(code)
"""


def test_a_second_daemon_is_refused_before_the_heavy_imports(tmp_path):
    state = tmp_path / "state"
    with state_lock(state):
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-c", PROBE, "run", "--state", str(state), "--config", str(ROOT / "campaigns.yaml")],
                             capture_output=True, text=True, env=clean_env(), cwd=tmp_path, timeout=60)
        elapsed = time.monotonic() - t0
    assert out.returncode == 2, out.stderr
    assert "another campaign daemon" in out.stderr and f"pid {os.getpid()}" in out.stderr
    assert "heavy: []" in out.stdout  # neither the store, the spec nor the daemon was imported
    assert elapsed < 5.0, elapsed  # was 9-22 s on a busy machine; typically well under a second now


def test_refuse_early_reads_state_and_db():
    assert refuse_early(["status"]) is None and refuse_early(["run", "--help"]) is None
    assert refuse_early(["run", "--db", "postgresql://x/y", "--state", "/nonexistent"]) is None


def test_refuse_early_names_the_holder(tmp_path):
    with state_lock(tmp_path):
        assert "another campaign daemon" in (refuse_early(["run", f"--state={tmp_path}"]) or "")
        assert refuse_early(["run", "--db", "postgresql://h/db", "--state", str(tmp_path)]) is None
    assert refuse_early(["run", "--state", str(tmp_path)]) is None


def test_a_mistyped_campaign_leaves_nothing_behind(tmp_path):
    state = tmp_path / "fresh"
    out = cli_output("run", "--campaign", "water-botles", "--state", state, "--config", ROOT / "campaigns.yaml", "--quiet",
                     cwd=tmp_path)
    assert out.returncode == 2
    assert "no campaign named water-botles" in out.stderr and "water-bottles" in out.stderr  # names the ones it has
    assert not state.exists()  # no folder, no daemon.lock
