"""Ctrl-C on `campaign run` says how to resume and records an event on each campaign under way (it
used to exit 130 without a word)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = f"""\
campaigns:
  - name: waiting
    topic: t
    input:
      propositions: {ROOT / "examples/ukpconvarg1-water/propositions.tsv"}
    task:
      kind: likert
    budget: "30.00"
    crowd:
      kind: none
    schedule:
      poll_interval: 0.2
"""


@pytest.mark.slow
def test_ctrl_c_says_how_to_resume_and_records_an_event(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    state = tmp_path / "st"
    proc = subprocess.Popen([sys.executable, "-m", "campaign", "run", "--config", "spec.yaml", "--state", str(state), "--quiet"],
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        posted = 0
        while time.monotonic() < deadline and not posted:
            time.sleep(0.5)
            if (state / "campaign.db").is_file():
                with sqlite3.connect(state / "campaign.db") as db:
                    try:
                        posted = db.execute("select count(*) from hits where status = 'posted'").fetchone()[0]
                    except sqlite3.OperationalError:
                        pass
        assert posted, "the run never posted a HIT"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert f"`campaign run --config spec.yaml --state {state}` resumes" in err, err
    with sqlite3.connect(state / "campaign.db") as db:
        rows = db.execute("select level, message from events where kind = 'interrupted' and campaign = 'waiting'").fetchall()
    assert rows and rows[0][0] == "warning" and "SIGINT" in rows[0][1], rows
