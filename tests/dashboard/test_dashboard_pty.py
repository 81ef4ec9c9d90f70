"""`campaign dashboard` in a real terminal (a pty read through a terminal emulator) beside a running
daemon: at 80x24 and 200x50 the numbers on screen are the store's (bracketed by reads before and after
the redraw, since the run moves on), campaign and status are never cut to an ellipsis, a resize lays
the screen out anew, and `p` then `q` leaves the campaign paused, `p` again resumes it, each with the
daemon's acknowledgement on screen."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import pytest
from sqlmodel import select

from campaign.readmodel.snapshot import Reader
from campaign.store import AssignmentRow, CampaignRow, HitRow, Store
from tests.support.cli import run_args, run_campaign, start_campaign
from tests.support.specs import campaign, simulated, write_spec
from tests.support.terminal import Term


def start_daemon(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    config = write_spec(tmp_path / "c.yaml", campaign("tty", task={"kind": "likert"}, budget="25.00",
                                                      crowd=simulated(25, speed=150, arrival_span="3h")))
    state = tmp_path / "state"
    proc = start_campaign(*run_args(config, state), stdout=subprocess.DEVNULL, stderr=(tmp_path / "daemon.err").open("w"))
    return proc, state


def status_of(state: Path, name: str = "tty") -> str:
    store = Store.open(state)
    try:
        with store.session() as s:
            return s.get(CampaignRow, name).status
    finally:
        store.close()


def read_store(state: Path):
    store = Store.open(state)
    try:
        return Reader(store, state).campaign("tty", time.time())
    finally:
        store.close()


def wait_started(state: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the daemon died: {(state.parent / 'daemon.err').read_text()[-2000:]}"
        if (state / "campaign.db").exists():
            try:
                v = read_store(state)
                if sum(st.collected for st in v.stages) >= 3 and v.acknowledged is not None:
                    return
            except Exception:  # the store is being created
                pass
        time.sleep(0.3)
    raise AssertionError("the campaign never got going")


def header_seconds(screen: str) -> int | None:
    m = re.search(r"campaign dashboard\s+(\d\d):(\d\d):(\d\d)", screen)
    return None if m is None else int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3])


def fresh_screen(term: Term, after_wall: float) -> str:
    """Wait for a redraw whose snapshot was taken after `after_wall` (its clock is in the header)."""
    lt = time.localtime(after_wall + 1)
    want = lt.tm_hour * 3600 + lt.tm_min * 60 + lt.tm_sec
    return term.wait_for(lambda s: (header_seconds(s) or -1) >= want, timeout=15)


def dollars(x: str) -> Decimal:
    return Decimal(x.replace(",", ""))


def check_numbers(screen: str, before, after) -> None:
    m = re.search(r"spent \$([\d,]+\.\d\d) \+ reserved \$([\d,]+\.\d\d) / budget \$([\d,]+\.\d\d)", screen)
    assert m, screen
    spent, reserved, budget = (dollars(g) for g in m.groups())
    assert budget == before.budget == Decimal("25.00")
    assert before.spent <= spent <= after.spent
    assert spent + reserved <= budget
    st_b, st_a = before.stages[0], after.stages[0]
    got = {k: tuple(int(x) for x in re.search(rf"{k}\s+[█░]+\s+(\d+)/(\d+)", screen).groups())
           for k in ("HITs posted", "collected", "reviewed")}
    assert st_b.hits_posted <= got["HITs posted"][0] <= st_a.hits_posted and got["HITs posted"][1] == st_a.hits_planned
    assert st_b.collected <= got["collected"][0] <= st_a.collected and got["collected"][1] in (st_b.slots, st_a.slots)
    assert st_b.reviewed <= got["reviewed"][0] <= st_a.reviewed


def campaign_line(screen: str, status: str) -> str:
    line = next((ln for ln in screen.splitlines() if ln.startswith("▶ tty ")), None)
    assert line is not None, screen
    assert line.startswith(f"▶ tty {status}"), line
    assert "…" not in line
    return line


@pytest.mark.slow
def test_dashboard_beside_a_running_daemon(tmp_path):
    proc, state = start_daemon(tmp_path)
    term = None
    try:
        wait_started(state, proc)
        # 80x24: the numbers are the store's, nothing in campaign/status is cut
        term = Term(["dashboard", "--state", str(state), "--interval", "0.5"], cols=80, rows=24)
        term.wait_for(lambda s: "▶ tty" in s)
        before = read_store(state)
        screen = fresh_screen(term, time.time())
        after = read_store(state)
        assert all(len(ln) <= 80 for ln in term.lines()) and len(term.lines()) == 24
        check_numbers(screen, before, after)
        campaign_line(screen, "running")
        summary = next(ln for ln in screen.splitlines() if ln.startswith("tty: "))
        assert summary.startswith("tty: running") and "…" not in summary
        assert "daemon live" in screen
        narrow = screen
        assert "excluded / blocked" not in narrow  # the narrow layout has no right-hand column

        # resize to 200x50: laid out anew, two columns, and the numbers still match
        term.resize(200, 50)
        before = read_store(state)
        screen = term.wait_for(lambda s: "excluded / blocked (newest first)" in s, timeout=10)
        screen = fresh_screen(term, time.time())
        after = read_store(state)
        assert max(len(ln) for ln in term.lines()) > 120
        check_numbers(screen, before, after)
        campaign_line(screen, "running")

        # p pauses (the intent `campaign pause` writes), the daemon acknowledges it, q leaves it paused
        term.send("p")
        screen = term.wait_for(lambda s: "acknowledged by the daemon" in s, timeout=20)
        assert status_of(state) == "paused"
        campaign_line(term.wait_for(lambda s: "▶ tty paused" in s), "paused")
        term.send("q")
        assert term.wait_exit() == 0
        term.close()
        time.sleep(1.0)
        assert status_of(state) == "paused"

        # a new dashboard: p resumes
        term = Term(["dashboard", "--state", str(state), "--interval", "0.5"], cols=80, rows=24)
        term.wait_for(lambda s: "▶ tty paused" in s)
        term.send("p")
        term.wait_for(lambda s: "acknowledged by the daemon: daemon: running" in s, timeout=20)
        assert status_of(state) == "running"
        campaign_line(term.wait_for(lambda s: "▶ tty running" in s), "running")
        term.send("q")
        assert term.wait_exit() == 0
        assert proc.poll() is None, "the daemon finished too early for this test to mean anything"
    finally:
        if term is not None:
            term.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_dashboard_without_a_daemon_says_so(tmp_path):
    """A store whose daemon stopped long ago: the header says no daemon runs, the campaign says since when."""
    from tests.dashboard.test_status import make_store

    store = make_store(tmp_path)
    from campaign.store import EventRow, LedgerRow

    with store.session() as s:
        s.add(EventRow(campaign="c1", ts=time.time() - 3600, kind="posted", message="an old event"))
        for row in s.exec(select(LedgerRow)).all():
            row.created_at = time.time() - 3600
            s.add(row)
    store.close()
    term = Term(["dashboard", "--state", str(tmp_path)], cols=80, rows=24)
    try:
        screen = term.wait_for(lambda s: "▶ c1" in s)
        assert "NO DAEMON RUNNING" in screen
        assert "(no daemon)" in screen
        assert "nothing written for" in screen
        term.send("q")
        assert term.wait_exit() == 0
    finally:
        term.close()


def test_dashboard_keys_filter_workers_and_cancel_confirmation(tmp_path):
    from tests.dashboard.test_status import make_store

    store = make_store(tmp_path)
    store.event("c1", "marketplace_error", "collecting h1: ThrottlingException", level="warning")
    for k in range(30):
        store.event("c1", "posted", f"routine event {k}")
    store.close()
    term = Term(["dashboard", "--state", str(tmp_path)], cols=80, rows=24)
    try:
        screen = term.wait_for(lambda s: "▶ c1" in s)
        # the warning is older than 30 info events but stays on screen until marked seen
        assert "! " in screen and "ThrottlingException" in screen
        term.send("a")
        term.wait_for(lambda s: "ThrottlingException" not in s)
        term.send("/")
        term.send("throttl\r")
        term.wait_for(lambda s: "ThrottlingException" in s and "routine event" not in s and "filter /throttl" in s)
        term.send("w")
        term.wait_for(lambda s: "workers of c1" in s and "W0" in s and "failed 3 of 3 traps" in s)
        term.send("w")
        term.send("c")
        term.wait_for(lambda s: "cancel this campaign?" in s)
        term.send("n")
        term.wait_for(lambda s: "not cancelled" in s)
        assert status_of(tmp_path, "c1") == "running"
        term.send("c")
        term.wait_for(lambda s: "cancel this campaign?" in s)
        term.send("y")
        term.wait_for(lambda s: "cancelling" in s)
        # once the screen shows it cancelling, `c` refuses at once instead of asking first and refusing the "y"
        term.wait_for(lambda s: "▶ c1 cancelling" in s, timeout=20)
        term.send("c")
        term.wait_for(lambda s: "c1 is cancelling; cannot cancel it" in s)
        assert "cancel this campaign?" not in term.text()
        term.send("q")
        assert term.wait_exit() == 0
    finally:
        term.close()
    assert status_of(tmp_path, "c1") == "cancelling"


@pytest.mark.slow
def test_export_key_writes_the_scores_the_cli_writes(tmp_path):
    from campaign.store import ItemRow, JudgmentRow
    from tests.readmodel.test_alerts import make_store as make_spec_store

    store = make_spec_store(tmp_path)
    with store.session() as s:
        for i, text in enumerate(["first", "second"]):
            s.add(ItemRow(campaign="c1", item_key=f"p{i}", text=text, position=i))
        s.add(HitRow(campaign="c1", stage="likert", hit_key="h0", item_keys='["p0", "p1"]', annotation="a", token="t",
                     status="closed", reward="0.06", assignments=2))
        for k in range(2):
            s.add(AssignmentRow(assignment_id=f"A{k}", campaign="c1", stage="likert", hit_key="h0", hit_id="H", worker_id=f"W{k}",
                                status="approved", answer_xml=""))
            for i in range(2):
                s.add(JudgmentRow(campaign="c1", stage="likert", assignment_id=f"A{k}", worker_id=f"W{k}", item_key=f"p{i}",
                                  value=float(5 - 3 * i)))
    store.close()
    term = Term(["dashboard", "--state", str(tmp_path)], cols=80, rows=24)
    try:
        term.wait_for(lambda s: "▶ c1" in s)
        term.send("e")
        term.wait_for(lambda s: "items written to" in s)
        term.send("q")
        assert term.wait_exit() == 0
    finally:
        term.close()
    (written,) = (tmp_path / "c1").glob("scores-*.csv")
    cli = run_campaign("export", "c1", "--state", str(tmp_path), timeout=None, check=True).stdout
    assert written.read_text(encoding="utf-8") == cli and "first" in cli
