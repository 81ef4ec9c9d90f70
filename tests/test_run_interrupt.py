"""Ctrl-C on `campaign run` says how to resume and records an event on each campaign under way (it
used to exit 130 without a word)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time

import pytest

from tests.support.cli import run_args, start_campaign
from tests.support.specs import NO_CROWD, campaign, write_spec


@pytest.mark.slow
def test_ctrl_c_says_how_to_resume_and_records_an_event(tmp_path):
    write_spec(tmp_path / "spec.yaml", campaign("waiting", topic="t", task={"kind": "likert"}, budget="30.00", crowd=NO_CROWD))
    state = tmp_path / "st"
    proc = start_campaign(*run_args("spec.yaml", state), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
