"""`campaign status` in a real terminal (a pty) beside a running daemon: the numbers on screen are the
store's numbers at that moment (bracketed by reads just before and after, since the run moves on)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ukpconvarg1-water"
SPEC = f"""\
campaigns:
  - name: tty
    topic: Should plastic water bottles be banned?
    input:
      propositions: {EXAMPLE / 'propositions.tsv'}
    task:
      kind: likert
    budget: "25.00"
    crowd:
      kind: simulated
      workers: 25
      speed: 600
      arrival_span: 3h
      truth: {EXAMPLE / 'truth.tsv'}
    schedule:
      poll_interval: 0.2
"""


def run_in_pty(args: list[str], seconds: float, cols: int = 200) -> str:
    """Run a command on a pseudo-terminal for up to `seconds`; return everything it drew."""
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.environ["COLUMNS"], os.environ["LINES"], os.environ["TERM"] = str(cols), "60", "xterm-256color"
        os.chdir(ROOT)
        os.execv(sys.executable, [sys.executable, "-m", "campaign", *args])
    out = b""
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            else:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
    finally:
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        os.close(fd)
    text = out.decode("utf-8", "replace")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def store_figures(state: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "campaign", "status", "--json", "--state", str(state)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["campaigns"][0]


@pytest.mark.slow
def test_status_on_a_terminal_shows_the_store_while_a_campaign_runs(tmp_path):
    (tmp_path / "c.yaml").write_text(SPEC, encoding="utf-8")
    state = tmp_path / "state"
    daemon = subprocess.Popen([sys.executable, "-m", "campaign", "run", "--config", str(tmp_path / "c.yaml"), "--state", str(state),
                               "--quiet"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
        screen = run_in_pty(["status", "--state", str(state)], seconds=20)
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
def test_status_watch_redraws_and_stops_on_ctrl_c(tmp_path):
    (tmp_path / "c.yaml").write_text(SPEC, encoding="utf-8")
    state = tmp_path / "state"
    subprocess.run([sys.executable, "-m", "campaign", "run", "--config", str(tmp_path / "c.yaml"), "--state", str(state),
                           "--quiet", "--max-seconds", "3"], cwd=ROOT, capture_output=True, text=True)
    from tests.dashboard.ptyterm import Term

    term = Term(["status", "--watch", "--interval", "0.3", "--state", str(state)], cols=100, rows=30)
    try:
        stamps: set[str] = set()

        def redrawn(screen: str) -> bool:
            stamps.update(re.findall(r"campaign dashboard\s+(\d\d:\d\d:\d\d)", screen))
            return len(stamps) >= 2 and "tty" in screen

        term.wait_for(redrawn, timeout=40)  # the full-screen dashboard, redrawn with fresh reads
        term.send("\x03")  # Ctrl-C
        assert term.wait_exit(20) == 0
    finally:
        term.close()
