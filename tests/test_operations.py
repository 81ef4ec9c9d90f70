"""pause / resume / cancel against a running daemon: effect within a tick, survival across a restart,
and a cancel that leaves no assignable HIT on the marketplace and no money reserved."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import boto3
import pytest

from campaign.daemon import saved_clock
from campaign.market.server import start_market
from tests.support.cli import cli_output, run_args, start_campaign
from tests.support.specs import campaign, simulated, write_spec


def cli(state: Path, *args: str) -> subprocess.CompletedProcess:
    """`campaign ARGS --state STATE` in this process (`cli_output`: the entry point `python -m campaign` calls):
    `status`, `pause`, `resume` and `cancel` start no daemon, and a new interpreter for each took seconds on a
    loaded CI machine, so the test's polling and the pause's landing lagged the daemon by as much."""
    return cli_output(*args, "--state", str(state))


def figures(state: Path) -> dict:
    """The campaign's status figures; {} while the daemon has not yet written its campaign (a loaded machine
    shows the store's file before the campaign's row)."""
    out = cli(state, "status", "--json")
    assert out.returncode == 0, out.stderr
    campaigns = json.loads(out.stdout)["campaigns"]
    return campaigns[0] if campaigns else {}


def start_daemon(config: Path, state: Path) -> subprocess.Popen:
    return start_campaign(*run_args(config, state, "--forever"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for(pred, timeout: float = 60.0, step: float = 0.2):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("condition not reached in time")


def stop(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        raise
    assert p.returncode in (0, 130), p.stderr.read()[-2000:] if p.stderr else ""


@pytest.fixture()
def config(tmp_path):
    def make(workers: int, span: str = "1m", speed: float = 600) -> Path:
        return write_spec(tmp_path / "campaigns.yaml", campaign("ops", task={"kind": "likert", "reward": "0.06"}, budget="30.00",
                                                                crowd=simulated(workers, speed=speed, arrival_span=span)))

    return make


@pytest.mark.slow
def test_pause_freezes_review_survives_restart_and_resume_finishes(tmp_path, config):
    state = tmp_path / "state"
    # --forever keeps the scaled clock (speed 1200): workers arrive over 6 simulated hours, 18 s of wall time.
    # At speed 600 over 3 hours the campaign once finished before the pause landed, when each `status` and
    # `pause` was a new interpreter taking seconds on a loaded CI machine; they run in this process now (`cli`),
    # so the pause lands within a poll of the fifth approval: about 13 of the 60 answers are in by then
    daemon = start_daemon(config(25, "6h", speed=1200), state)
    try:
        wait_for(lambda: (state / "campaign.db").exists() and figures(state).get("assignments", {}).get("approved", 0) >= 5)
        assert cli(state, "pause", "ops").returncode == 0
        time.sleep(1.0)  # a few ticks: the one in flight may finish its approvals
        frozen = figures(state)
        assert frozen["status"] == "paused"
        time.sleep(2.0)
        later = figures(state)
        assert later["assignments"]["approved"] == frozen["assignments"]["approved"], "approvals went on while paused"
        stop(daemon)
        daemon = start_daemon(config(25, "6h", speed=1200), state)  # still paused after a restart
        time.sleep(2.5)
        assert figures(state)["status"] == "paused"
        assert figures(state)["assignments"]["approved"] == frozen["assignments"]["approved"]
        assert cli(state, "resume", "ops").returncode == 0
        wait_for(lambda: figures(state).get("status") == "finished", timeout=300)
    finally:
        if daemon.poll() is None:
            stop(daemon)
    f = figures(state)
    assert f["assignments"]["approved"] + f["assignments"]["rejected"] == 60 and f["money"]["reserved"] == "0.00"


@pytest.mark.slow
def test_cancel_expires_every_hit_and_releases_every_reservation(tmp_path, config):
    state = tmp_path / "state"
    daemon = start_daemon(config(3), state)  # 3 workers can never fill a 5-assignment HIT
    try:
        wait_for(lambda: (state / "campaign.db").exists() and figures(state).get("assignments", {}).get("submitted", 0) >= 10)
        assert Decimal(figures(state)["money"]["reserved"]) > 0
        assert cli(state, "cancel", "ops").returncode == 0
        wait_for(lambda: figures(state).get("status") == "cancelled", timeout=120)
    finally:
        stop(daemon)
    f = figures(state)
    assert f["money"]["reserved"] == "0.00"
    assert Decimal(f["money"]["spent"]) == Decimal("0.07") * f["assignments"]["approved"]
    market = start_market(state / "market", clock=saved_clock(state), mode="prod", balance=Decimal("10000.00"))
    try:
        client = boto3.client("mturk", region_name="us-east-1", endpoint_url=market.endpoint_url,
                              aws_access_key_id=market.credentials.access_key_id,
                              aws_secret_access_key=market.credentials.secret_access_key)
        statuses = [h["HITStatus"] for page in client.get_paginator("list_hits").paginate() for h in page["HITs"]]
    finally:
        market.stop()
    assert statuses and "Assignable" not in statuses
