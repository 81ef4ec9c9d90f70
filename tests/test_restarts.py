"""Restarts never hand held work to the marketplace's auto-approval.

The simulated clock resumes where the last run left it (no margin per restart), and review decides
on every assignment before its AutoApprovalTime. A short auto-approval delay (12 simulated hours, twelve
real seconds at 3600x) makes the old behaviour (two simulated hours added per restart) fail here within
six restarts (eight are made).
"""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from campaign.daemon import make_clock, save_clock
from campaign.spec import load_spec
from tests.support.cli import run_args, run_campaign, start_campaign
from tests.support.specs import campaign, simulated, write_spec
from tests.support.sqlite import count

SPEC = campaign("restarts", task={"kind": "likert", "reward": "0.06", "auto_approval_delay": "12h"}, budget="30.00",
                crowd=simulated(25, speed=3600, arrival_span="30m"))


@pytest.mark.slow
def test_many_restarts_never_let_the_marketplace_approve_held_work(tmp_path):
    config = write_spec(tmp_path / "campaigns.yaml", SPEC)
    state = tmp_path / "state"
    run = run_args(config, state, seed=5)
    for n, delay in enumerate((2.0, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5)):
        p = start_campaign(*run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL if n % 2 else signal.SIGTERM)  # both a clean stop and a crash
        p.wait(timeout=60)
    proc = run_campaign(*run, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    store, market = state / "campaign.db", state / "market" / "market.db"
    assert count(store, "SELECT COUNT(*) FROM assignments") >= 60  # 12 HITs of 5 propositions, 5 workers each
    assert count(store, "SELECT COUNT(*) FROM assignments WHERE status IN ('submitted', 'approving', 'rejecting')") == 0
    # the marketplace stamps an assignment it approved by itself with its AutoApprovalTime
    assert count(market, "SELECT COUNT(*) FROM assignments WHERE status = 'Approved' AND approval_time = auto_approval_time") == 0
    assert count(store, "SELECT COUNT(*) FROM events WHERE kind = 'auto_approved'") == 0


def test_a_restart_resumes_the_simulated_clock_where_it_stopped(tmp_path):
    config = write_spec(tmp_path / "campaigns.yaml", SPEC)
    campaigns = list(load_spec(config).campaigns)
    state = tmp_path / "state"
    clock = make_clock(campaigns, state)
    save_clock(clock, state)
    first = clock.now()
    wall = time.monotonic()
    for _ in range(10):  # ten restarts in a row, no pass in between
        clock = make_clock(campaigns, state)
        save_clock(clock, state)
    moved = clock.now() - first
    # only the time that really passed, at the clock's speed (it used to add 2 x speed per restart)
    assert 0 <= moved <= (time.monotonic() - wall + 0.5) * clock.speed
