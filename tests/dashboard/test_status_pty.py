"""`campaign status` in a real terminal (a pty) beside a running daemon: the numbers on screen are the
store's numbers at that moment (bracketed by reads just before and after, since the run moves on)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import pytest

from tests.support.cli import run_args, run_campaign, start_campaign
from tests.support.specs import campaign, simulated, write_spec
from tests.support.terminal import Term, capture_in_pty

SPEC = campaign("tty", task={"kind": "likert"}, budget="25.00", crowd=simulated(25, speed=600, arrival_span="6h"))


def store_figures(state: Path) -> dict:
    out = run_campaign("status", "--json", "--state", str(state), timeout=None, check=True).stdout
    return json.loads(out)["campaigns"][0]


@pytest.mark.slow
@pytest.mark.serial
def test_status_on_a_terminal_shows_the_store_while_a_campaign_runs(tmp_path):
    config = write_spec(tmp_path / "c.yaml", SPEC)
    state = tmp_path / "state"
    daemon = start_campaign(*run_args(config, state), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if (state / "campaign.db").exists():
                try:
                    if store_figures(state)["assignments"]["submitted"] >= 5:
                        break
                except (subprocess.CalledProcessError, IndexError):
                    pass
            time.sleep(0.2)
        before = store_figures(state)
        screen = capture_in_pty(["status", "--state", str(state)], seconds=20)
        after = store_figures(state)
        assert daemon.poll() is None, "the daemon finished too early for this test to mean anything"
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)
    row = next(line for line in screen.splitlines() if "tty" in line and "$" in line)
    dollars = [Decimal(x) for x in re.findall(r"\$(\d+\.\d\d)", row)]
    spent, reserved, fees, budget, projected = dollars[:5]
    assert budget == Decimal(before["money"]["budget"])
    assert Decimal(before["money"]["spent"]) <= spent <= Decimal(after["money"]["spent"])
    assert Decimal(before["money"]["fees"]) <= fees <= Decimal(after["money"]["fees"])
    triples = re.findall(r"(\d+)/(\d+)/(\d+)", row)  # HITs posted/assignable/done, then answers sub/appr/rej
    sub, appr, rej = (int(x) for x in triples[1])
    assert before["assignments"]["submitted"] <= sub <= after["assignments"]["submitted"]
    assert before["assignments"]["approved"] <= appr <= after["assignments"]["approved"]
    assert rej == 0


@pytest.mark.slow
@pytest.mark.serial
def test_status_watch_redraws_and_stops_on_ctrl_c(tmp_path):
    config = write_spec(tmp_path / "c.yaml", SPEC)
    state = tmp_path / "state"
    run_campaign(*run_args(config, state, "--max-seconds", "3"), timeout=None)

    term = Term(["status", "--watch", "--interval", "0.3", "--state", str(state)], cols=100, rows=30)
    try:
        stamps: set[str] = set()

        def redrawn(screen: str) -> bool:
            stamps.update(re.findall(r"campaign dashboard\s+(\d\d:\d\d:\d\d)", screen))
            return len(stamps) >= 2 and "tty" in screen

        term.wait_for(redrawn, timeout=40)  # the full-screen dashboard, redrawn with fresh reads
        term.send("\x03")  # Ctrl-C
        assert term.wait_exit(120) == 0  # a bound for a hang: beside 4 busy processes exiting took over 20 s
    finally:
        term.close()
