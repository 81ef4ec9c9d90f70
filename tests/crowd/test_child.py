"""The daemon's simulated crowds in a child process: started on the daemon's clock, working the
marketplace, and gone as soon as the daemon is (a crowd left behind by a SIGKILLed daemon must not
work the next daemon's HITs)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.processes import alive, child_dies_with
from tests.support.cli import clean_env
from tests.support.paths import ROOT
from tests.support.specs import campaign, simulated, spec_yaml

SPEC = spec_yaml(campaign("kid", task={"kind": "likert"}, budget="10.00", crowd=simulated(3), poll_interval=None))

# a stand-in daemon: the marketplace in-process and the crowd's child process, as `campaign run` has them
DAEMON = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from campaign.clock import ScaledClock
    from campaign.crowd.child import ChildConfig, CrowdJob, CrowdProcess
    from campaign.market.server import start_market
    from campaign.spec import load_spec
    from campaign.store import Store

    state = Path(sys.argv[2])
    clock = ScaledClock(speed=3600.0)
    Store.open(state).close()
    market = start_market(state / "market", clock=clock, mode="prod")
    camp = load_spec(sys.argv[1]).campaigns[0]
    crowd = CrowdProcess(ChildConfig(endpoint=market.endpoint_url, market_state=state / "market", clock=clock.shared(),
                                     jobs=(CrowdJob(camp, 0, 0),), state_dir=state, db=None, parent=os.getpid()))
    print(crowd.proc.pid, flush=True)
    if sys.argv[3] == "stop":
        crowd.stop()
        print(crowd.proc.returncode, flush=True)
    else:
        time.sleep(60)
""")


def _start(tmp_path: Path, mode: str) -> subprocess.Popen:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    return subprocess.Popen([sys.executable, "-c", DAEMON, str(spec), str(tmp_path / "state"), mode],
                            cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_the_crowd_registers_its_workers_and_stops_when_asked(tmp_path):
    daemon = _start(tmp_path, "stop")
    out, _ = daemon.communicate(timeout=120)
    pid, code = out.split()
    assert daemon.returncode == 0 and int(code) == 0  # ready, then a clean stop on SIGTERM
    assert not alive(int(pid))
    from campaign.market.db import Database

    db = Database(tmp_path / "state" / "market")
    try:
        n = db.conn.execute("SELECT COUNT(*) FROM workers").fetchone()[0]
    finally:
        db.close()
    assert n == 3  # the campaign's `workers: 3`, signed up through the marketplace's operator


@pytest.mark.slow
def test_the_crowd_dies_with_a_killed_daemon(tmp_path):
    daemon = _start(tmp_path, "sleep")
    assert child_dies_with(daemon)


def test_only_campaigns_of_built_in_kinds_go_to_a_child(tmp_path):
    from campaign.crowd.child import child_can_run
    from campaign.spec import load_spec
    from campaign.tasks import get, register

    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    camp = load_spec(spec).campaigns[0]
    assert child_can_run(camp)

    original = get("likert")

    class Local(type(original)):  # type: ignore[misc]
        """A kind this process alone knows (as a plugin or a test defines one)."""

    register(Local(), replace=True)
    try:
        assert not child_can_run(camp)  # its crowd stays on threads in the daemon (test_extra_kind runs one)
    finally:
        register(original, replace=True)
