"""Defects of issue 15 ("State"): the simulated clock saved by concurrent ticks, and a store whose
marketplace database is gone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from campaign.clock import ScaledClock
from campaign.daemon import save_clock

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "ukpconvarg1-water"


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


SPEC = """\
campaigns:
  - name: lost
    topic: Should plastic water bottles be banned?
    input:
      propositions: {props}
    task:
      kind: likert
      assignments: 3
    budget: "30.00"
    crowd:
      kind: simulated
      workers: 10
      speed: 60
      arrival_span: 2h
      truth: {truth}
    schedule:
      poll_interval: 0.2
"""


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CAMPAIGN_TEST_CRASH"}
    return subprocess.run([sys.executable, "-m", "campaign", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_missing_marketplace_database_stops_the_run_at_once(tmp_path):
    cfg, state = tmp_path / "campaigns.yaml", tmp_path / "state"
    cfg.write_text(SPEC.format(props=EXAMPLE / "propositions.tsv", truth=EXAMPLE / "truth.tsv"), encoding="utf-8")
    first = _cli("run", "--config", str(cfg), "--state", str(state), "--quiet", "--max-seconds", "3")
    assert first.returncode == 3, first.stderr  # stopped with HITs up (a slow crowd: little is done in 3 s)
    shutil.rmtree(state / "market")  # the marketplace's database is gone, the store is kept
    started = time.monotonic()
    again = _cli("run", "--config", str(cfg), "--state", str(state), "--quiet", "--max-seconds", "30")
    took = time.monotonic() - started
    assert again.returncode == 2, (again.returncode, again.stderr)  # looped until --max-seconds (exit 3) before
    assert took < 20
    assert "lost" in again.stderr and "marketplace" in again.stderr and "unknown" in again.stderr


NONE_SPEC = """\
campaigns:
  - name: people
    topic: Should plastic water bottles be banned?
    input:
      propositions: {props}
    task:
      kind: likert
    budget: "30.00"
    crowd:
      kind: none
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_real_crowd_run_prints_the_worker_site_on_a_fixed_port(tmp_path):
    import signal
    import urllib.request

    cfg, state, port = tmp_path / "campaigns.yaml", tmp_path / "state", _free_port()
    cfg.write_text(NONE_SPEC.format(props=EXAMPLE / "propositions.tsv"), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CAMPAIGN_TEST_CRASH"}
    proc = subprocess.Popen([sys.executable, "-m", "campaign", "run", "--config", str(cfg), "--state", str(state), "--quiet",
                             "--market-port", str(port), "--max-seconds", "60"], cwd=ROOT, env=env,
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


TWO = """\
campaigns:
{blocks}
"""

BLOCK = """\
  - name: {name}
    topic: Should plastic water bottles be banned?
    input:
      propositions: {props}
    task:
      kind: likert
      assignments: 5
    budget: "30.00"
    crowd:
      kind: simulated
      workers: 6
      speed: 3600
      arrival_span: 10m
      truth: {truth}
    schedule:
      poll_interval: 0.2
"""


def test_each_campaign_is_worked_by_its_own_workers_only(tmp_path):
    """`workers: 6` in each of two campaigns: 6 people answer each, never the other's HITs (one shared crowd
    of 12 used to work both)."""
    from sqlmodel import select

    from campaign.store import AssignmentRow, CampaignRow, Store

    lines = (EXAMPLE / "propositions.tsv").read_text(encoding="utf-8").splitlines()
    blocks = []
    for name, part in (("first", lines[1:21]), ("second", lines[21:41])):
        props = tmp_path / f"{name}.tsv"
        props.write_text("\n".join([lines[0], *part]) + "\n", encoding="utf-8")
        blocks.append(BLOCK.format(name=name, props=props, truth=EXAMPLE / "truth.tsv"))
    cfg, state = tmp_path / "campaigns.yaml", tmp_path / "state"
    cfg.write_text(TWO.format(blocks="".join(blocks)), encoding="utf-8")
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
