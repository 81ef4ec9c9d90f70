"""A returned submission's work pay whose pay call may have gone through unrecorded (the daemon killed
just before the call left: the journal says "paying" and nothing ever shows on Prolific) is never paid
again by the program: after the reconciliation time it is held as `work:SUBMISSION`, the study stays
open, and the researcher's `campaign decide NAME work:SUBMISSION unpaid` has it paid once; the campaign
then finishes with the audit clean. Other decisions are refused for such a row, with the reason."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlmodel import select

from campaign.prolific.audit import audit_run, gather
from campaign.state import HeldStatus, ProlificBonusState
from campaign.store import HeldRow, ProlificBonusRow, Store
from tests.support.cli import CRASH, clean_env, cli_output, run_args, run_campaign, start_campaign

pytestmark = [pytest.mark.prolific, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NAME = "water-prolific"
# How long the resumed run is watched on its virtual clock once the work pay is held, still unfinished (the
# study open, nothing paid): a simulated day, 96 reconciliation times and six of a participant's 4 hours;
# or until WATCHED_AT_MOST seconds of wall time from its start (the `--max-seconds 20` it was given before),
# whichever comes first: on a loaded machine that day takes longer to simulate, and the wait stays as it was.
HELD_FOR = 86400.0
WATCHED_AT_MOST = 20.0


def _cli(*args: str, crash: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return run_campaign(*args, env=clean_env(["PROLIFIC_TOKEN"], **({CRASH: crash} if crash else {})), timeout=timeout)


def _held(state: Path) -> list[dict]:
    out = cli_output("held", NAME, "--json", "--state", str(state))  # in this process: no daemon, polled
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _virtual_now(state: Path) -> float:
    """The run's virtual time, as its passes save it (`campaign.daemon.save_clock`)."""
    return float(json.loads((state / "market" / "clock.json").read_text())["now"])


def _wait_unfinished(run: subprocess.Popen, state: Path, until: Callable[[], bool], timeout: float = 300) -> float:
    """Poll `until()` while `run` is still going (it must not end by itself); the run's virtual time then."""
    end = time.monotonic() + timeout
    while not until():
        assert run.poll() is None, f"the run ended (exit {run.returncode}) with a work pay uncertain"
        assert time.monotonic() < end, "the run never got there"
        time.sleep(0.2)
    assert run.poll() is None, f"the run ended (exit {run.returncode}) with a work pay uncertain"
    return _virtual_now(state)


def test_an_uncertain_work_pay_waits_for_the_researcher_and_is_paid_once(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    config = tmp_path / "examples" / "prolific.yaml"
    state = tmp_path / "state"
    proc = _cli(*run_args(config, state, seed=1), crash="prolific.pay_unrecorded:1")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    store = Store.open(state, None, create=False)
    try:
        with store.session() as s:
            paying = s.exec(select(ProlificBonusRow).where(ProlificBonusRow.state == ProlificBonusState.PAYING)).one()
    finally:
        store.close()
    assert paying.key == f"work:{paying.submission_id}", "the first payment of this run was expected to be a work pay"

    # reconciled, then held: it cannot finish. The run goes on in virtual time as fast as the machine allows
    # (a simulated day in about 8 s here); rather than a fixed stretch of wall time (`--max-seconds 20`, most of
    # it spent after the hold), it is watched until its clock is a day past the hold (HELD_FOR), then stopped
    with (tmp_path / "held-run.log").open("w") as log:
        started = time.monotonic()
        run = start_campaign(*run_args(config, state, seed=1), env=clean_env(["PROLIFIC_TOKEN"]), stdout=subprocess.DEVNULL,
                             stderr=log, text=True)
        try:
            held_at = _wait_unfinished(run, state, lambda: any(r["row"] == paying.key for r in _held(state)))
            _wait_unfinished(run, state, lambda: _virtual_now(state) >= held_at + HELD_FOR
                             or time.monotonic() - started >= WATCHED_AT_MOST)
        finally:
            if run.poll() is None:
                run.send_signal(signal.SIGTERM)
            run.wait(timeout=120)
    assert run.returncode == 130, (tmp_path / "held-run.log").read_text()[-3000:]  # stopped, not ended
    rows = [r for r in _held(state) if r["row"] == paying.key]
    assert len(rows) == 1 and rows[0]["kind"] == "work" and "not paid again automatically" in rows[0]["reason"]

    # the researcher's decisions in this process (`cli_output`: they start no daemon)
    refused = cli_output("decide", NAME, paying.key, "approve", "--state", str(state))
    assert refused.returncode == 2 and "`paid`" in refused.stderr and "`unpaid`" in refused.stderr
    assert cli_output("decide", NAME, paying.key, "unpaid", "--state", str(state)).returncode == 0
    proc = _cli(*run_args(config, state, seed=1))
    assert proc.returncode == 0, proc.stderr[-3000:]

    store = Store.open(state, None, create=False)
    try:
        assert audit_run(state, NAME, store) == []
        facts = gather(emulator_db=state / "prolific" / "prolific.db", door_db=state / "prolific-site" / "prolific-site.sqlite",
                       market_db=state / "market" / "market.db", store=store, campaign=NAME)
        with store.session() as s:
            row = s.get(ProlificBonusRow, paying.id)
            settled = s.exec(select(HeldRow).where(HeldRow.row_key == paying.key)).one()
    finally:
        store.close()
    assert row is not None and row.state == ProlificBonusState.PAID
    assert facts.batches_paid[str(row.batch_id)] == 1 and facts.bonus_payments[paying.submission_id] == [paying.cents]
    assert settled.status == HeldStatus.SETTLED and "paid now" in (settled.outcome or "")
