"""Defects of issue 15 ("State"): the simulated clock saved by concurrent ticks, and a store whose
marketplace database is gone."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time

import pytest

from campaign.clock import ScaledClock
from campaign.daemon import save_clock
from tests.support.cli import run_args, run_campaign, start_campaign
from tests.support.paths import WATER
from tests.support.specs import NO_CROWD, campaign, simulated, write_spec


def test_concurrent_clock_saves_never_fail(tmp_path):
    """Two campaigns' ticks save the clock at the same moment; each used to write the same clock.tmp and
    one os.replace found it gone (FileNotFoundError)."""
    clock = ScaledClock(speed=3600)
    errors: list[BaseException] = []

    def saver() -> None:
        for _ in range(300):
            try:
                save_clock(clock, tmp_path)
            except BaseException as exc:  # noqa: BLE001 - every failure is the finding
                errors.append(exc)

    threads = [threading.Thread(target=saver) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    saved = json.loads((tmp_path / "market" / "clock.json").read_text())
    assert saved["speed"] == 3600 and saved["now"] <= clock.now()
    assert [p.name for p in (tmp_path / "market").iterdir()] == ["clock.json"]  # no temp file left behind


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_campaign(*args, timeout=timeout)


@pytest.mark.slow
def test_missing_marketplace_database_stops_the_run_at_once(tmp_path):
    cfg, state = tmp_path / "campaigns.yaml", tmp_path / "state"
    write_spec(cfg, campaign("lost", task={"kind": "likert", "assignments": 3}, budget="30.00",
                             crowd=simulated(10, speed=60, arrival_span="2h")))
    first = _cli("run", "--config", str(cfg), "--state", str(state), "--quiet", "--max-seconds", "3")
    assert first.returncode == 3, first.stderr  # stopped with HITs up (a slow crowd: little is done in 3 s)
    shutil.rmtree(state / "market")  # the marketplace's database is gone, the store is kept
    started = time.monotonic()
    again = _cli("run", "--config", str(cfg), "--state", str(state), "--quiet", "--max-seconds", "30")
    took = time.monotonic() - started
    assert again.returncode == 2, (again.returncode, again.stderr)  # looped until --max-seconds (exit 3) before
    assert took < 20
    assert "lost" in again.stderr and "marketplace" in again.stderr and "unknown" in again.stderr


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_real_crowd_run_prints_the_worker_site_on_a_fixed_port(tmp_path):
    import signal
    import urllib.request

    cfg, state, port = tmp_path / "campaigns.yaml", tmp_path / "state", _free_port()
    write_spec(cfg, campaign("people", task={"kind": "likert"}, budget="30.00", crowd=NO_CROWD, poll_interval=None))
    proc = start_campaign(*run_args(cfg, state, "--market-port", str(port), "--max-seconds", "60"),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("worker site for people: "), (line, proc.stderr.read() if proc.poll() is not None else "")
        url = line.split(": ", 1)[1].split()[0]
        assert url == f"http://127.0.0.1:{port}/"
        assert "campaign market worker add" in line
        with urllib.request.urlopen(url, timeout=10) as reply:  # the site's sign-in page
            assert reply.status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_pipeline_brackets_each_pass_with_heartbeat_and_alerts():
    from campaign.steps.pipeline import PIPELINE, steps_for

    names = [s.name for s in PIPELINE]
    assert names[0] == "heartbeat" and names[-1] == "alerts"
    for status in ("running", "paused", "cancelling", "budget_exhausted"):
        ran = [s.name for s in steps_for(status)]
        assert ran[0] == "heartbeat" and ran[-1] == "alerts" and "budget" in ran
    assert [s.name for s in steps_for("budget_exhausted")] == ["heartbeat", "budget", "decisions", "alerts"]  # held rows settle too


@pytest.mark.slow
def test_each_campaign_is_worked_by_its_own_workers_only(tmp_path):
    """`workers: 6` in each of two campaigns: 6 people answer each, never the other's HITs (one shared crowd
    of 12 used to work both)."""
    from sqlmodel import select

    from campaign.store import AssignmentRow, CampaignRow, Store

    lines = (WATER / "propositions.tsv").read_text(encoding="utf-8").splitlines()
    blocks = []
    for name, part in (("first", lines[1:21]), ("second", lines[21:41])):
        props = tmp_path / f"{name}.tsv"
        props.write_text("\n".join([lines[0], *part]) + "\n", encoding="utf-8")
        blocks.append(campaign(name, task={"kind": "likert", "assignments": 5}, budget="30.00", propositions=props,
                               crowd=simulated(6, speed=3600, arrival_span="10m")))
    cfg, state = write_spec(tmp_path / "campaigns.yaml", *blocks), tmp_path / "state"
    done = _cli("run", "--config", str(cfg), "--state", str(state), "--quiet", "--max-seconds", "90", timeout=150)
    assert done.returncode == 0, done.stderr
    store = Store.open(state)
    try:
        with store.session() as s:
            assert {r.status for r in s.exec(select(CampaignRow)).all()} == {"finished"}
            by = {name: {a.worker_id for a in s.exec(select(AssignmentRow).where(AssignmentRow.campaign == name)).all()}
                  for name in ("first", "second")}
    finally:
        store.close()
    assert 0 < len(by["first"]) <= 6 and 0 < len(by["second"]) <= 6
    assert not by["first"] & by["second"]
