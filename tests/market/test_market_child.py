"""The built-in marketplace of `campaign run` in a child process: serving on the daemon's simulated
clock with the folder's own account, reachable by a worker client of the daemon's process, refusing a
port that is taken with the reason, gone as soon as the daemon is (a marketplace left behind by a
SIGKILLed daemon must not take work for the next one), and started again at the same addresses when it
dies while the daemon lives."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from decimal import Decimal
from pathlib import Path

import pytest

from campaign.clock import ScaledClock
from campaign.market.child import MarketConfig, MarketProcess, MarketStartError
from campaign.market.worker_client import WorkerClient
from campaign.marketplaces.mturk_client import make_client
from tests.processes import child_dies_with
from tests.support.paths import ROOT


def _config(tmp_path: Path, clock: ScaledClock | None = None, port: int = 0) -> MarketConfig:
    return MarketConfig(state_dir=tmp_path / "market", clock=clock.shared() if clock else None, balance=Decimal("123.45"),
                        port=port, content_port=0, public_url=None, parent=os.getpid())


def test_the_child_serves_the_folder_account_on_the_daemon_clock(tmp_path):
    clock = ScaledClock(speed=3600.0, start=2_000_000_000.0)
    market = MarketProcess(_config(tmp_path, clock))
    try:
        assert market.endpoint_url.startswith("http://127.0.0.1:") and market.content_url != market.endpoint_url
        client = make_client("local", market.endpoint_url, credentials=market.credentials)
        assert client.call("get_account_balance")["AvailableBalance"] == "123.45"
        hit_type = client.call("create_hit_type", Title="t", Description="d", Reward="0.05",
                               AssignmentDurationInSeconds=600)["HITTypeId"]
        question = ("<HTMLQuestion xmlns='http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/"
                    "2011-11-11/HTMLQuestion.xsd'><HTMLContent><![CDATA[<p>x</p>]]></HTMLContent>"
                    "<FrameHeight>400</FrameHeight></HTMLQuestion>")
        hit = client.call("create_hit_with_hit_type", HITTypeId=hit_type, MaxAssignments=1,
                          LifetimeInSeconds=3600, Question=question)["HIT"]
        created = hit["CreationTime"].timestamp()
        assert abs(created - clock.now()) < 3600 * 5  # the simulated clock (2033), not the wall's (a few s of slack x 3600)
        worker = WorkerClient(market.endpoint_url)
        worker.register("AW1")  # through the operator registered for the child's URL in this process
        assert [h["HITId"] for h in worker.available("AW1")] == [hit["HITId"]]
    finally:
        market.stop()
    assert market.proc.returncode == 0


def test_a_taken_port_is_refused_with_the_reason(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(MarketStartError, match="cannot listen on 127.0.0.1"):
            MarketProcess(_config(tmp_path, port=taken.getsockname()[1]))


DAEMON = textwrap.dedent("""
    import os, sys, time
    from decimal import Decimal
    from pathlib import Path
    from campaign.market.child import MarketConfig, MarketProcess

    market = MarketProcess(MarketConfig(state_dir=Path(sys.argv[1]), clock=None, balance=Decimal("10"), port=0,
                                        content_port=0, public_url=None, parent=os.getpid()))
    print(market.proc.pid, flush=True)
    time.sleep(60)
""")


def test_the_marketplace_dies_with_a_killed_daemon(tmp_path):
    daemon = subprocess.Popen([sys.executable, "-c", DAEMON, str(tmp_path / "market")], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    assert child_dies_with(daemon)


def test_a_child_that_dies_is_started_again_at_the_same_addresses(tmp_path):
    market = MarketProcess(_config(tmp_path))
    told: list[str] = []
    market.on_restart = told.append  # the daemon writes these to its campaigns' events
    try:
        client = make_client("local", market.endpoint_url, credentials=market.credentials, max_attempts=0)
        client.call("create_qualification_type", Name="kept", Description="d", QualificationTypeStatus="Active")
        first, endpoint, content = market.proc.pid, market.endpoint_url, market.content_url
        os.kill(first, signal.SIGKILL)  # the OOM killer, say
        deadline = time.monotonic() + 30
        while market.restarts == 0:
            assert time.monotonic() < deadline, "the marketplace was not started again"
            time.sleep(0.05)
        assert market.proc.pid != first and (market.endpoint_url, market.content_url) == (endpoint, content)
        assert told == [f"the built-in marketplace's process exited (signal 9) while the run needed it: starting it "
                        f"again on {endpoint}"]
        listed = client.call("list_qualification_types", MustBeRequestable=False, MustBeOwnedByCaller=True)
        assert [q["Name"] for q in listed["QualificationTypes"]] == ["kept"]  # its folder's state, as it was
    finally:
        market.stop()
    assert market.proc.returncode == 0 and market.restarts == 1  # stopped for good: not started again


def test_a_port_taken_while_it_was_down_is_tried_again_until_free(tmp_path, monkeypatch):
    monkeypatch.setattr(MarketProcess, "RESTART_DELAYS", (0.1,))
    ports: list[int] = []
    real = MarketProcess._spawn

    def squatted(self, config):  # the second and third starts find the port taken
        ports.append(config.port)
        if len(ports) in (2, 3):
            raise MarketStartError(f"cannot listen on 127.0.0.1:{config.port}: Address already in use")
        return real(self, config)

    monkeypatch.setattr(MarketProcess, "_spawn", squatted)
    market = MarketProcess(_config(tmp_path))
    try:
        first = market.proc.pid
        market.proc.kill()
        deadline = time.monotonic() + 30
        while market.restarts == 0:
            assert time.monotonic() < deadline, "not started again once the port was free"
            time.sleep(0.05)
        assert market.proc.pid != first and ports == [0, market.port, market.port, market.port]
        assert make_client("local", market.endpoint_url, credentials=market.credentials).call(
            "get_account_balance")["AvailableBalance"] == "123.45"
    finally:
        market.stop()


class _Waits(threading.Event):
    """The watcher's stop event, noting every time-out it waits for."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is not None:
            self.waits.append(timeout)
        return super().wait(timeout)


def test_a_child_that_keeps_dying_at_once_is_started_again_ever_more_slowly(tmp_path, monkeypatch):
    monkeypatch.setattr(MarketProcess, "RESTART_DELAYS", (0.2, 0.4, 0.8))
    market = MarketProcess(_config(tmp_path))
    market._stopping = waits = _Waits()
    try:
        for n in (1, 2, 3):
            market.proc.kill()  # each soon after its start
            deadline = time.monotonic() + 30
            while market.restarts < n:
                assert time.monotonic() < deadline, f"restart {n} did not come"
                time.sleep(0.02)
        assert waits.waits == [0.2, 0.4]  # the first death is restarted at once, then each waits longer
    finally:
        market.stop()
