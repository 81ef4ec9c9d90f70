"""The end-to-end and SIGKILL tests of tests/test_e2e.py with the store on a real PostgreSQL server.

Crash safety must not depend on SQLite's locking: the same crash points, a restart, and the same audit
of the store against the marketplace, with `--db postgresql+psycopg://...` (a throw-away server, see
tests/pg.py). A subset of test_e2e's crash points (posting, reviewing, random instants) keeps CI time
down.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.cli import run_args, start_campaign
from tests.test_e2e import check_consistent, run_cli, write_spec

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_demo_campaign_on_postgres_matches_the_marketplace_and_the_sqlite_run(tmp_path: Path, pg_url: str) -> None:
    config = write_spec(tmp_path)
    proc = run_cli(config, tmp_path / "pg", db=pg_url)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = check_consistent(tmp_path / "pg", pg_url)
    assert len(facts["hits"]) == 12
    assert not (tmp_path / "pg" / "campaign.db").exists(), "the store went to SQLite, not to the server"
    proc = run_cli(config, tmp_path / "lite")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "pg" / "e2e" / "scores.csv").read_bytes() == (tmp_path / "lite" / "e2e" / "scores.csv").read_bytes()


@pytest.mark.parametrize("point", ["post.after_call:4", "review.after_call:11"])
def test_sigkill_then_restart_on_postgres_loses_nothing_and_pays_once(tmp_path: Path, pg_url: str, point: str) -> None:
    config = write_spec(tmp_path)
    state = tmp_path / "state"
    proc = run_cli(config, state, env_extra={"CAMPAIGN_TEST_CRASH": point}, db=pg_url, extra=("--lease-ttl", "600"))
    assert proc.returncode == -signal.SIGKILL, f"expected a crash at {point}; rc={proc.returncode}\n{proc.stderr[-2000:]}"
    # the dead daemon's lease runs 10 more minutes, but its process is gone from this machine: the
    # restarted daemon takes the campaign over at once instead of waiting the lease out
    t0 = time.monotonic()
    proc = run_cli(config, state, db=pg_url, extra=("--lease-ttl", "3"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_consistent(state, pg_url)
    assert time.monotonic() - t0 < 120


def test_sigkill_at_random_instants_on_postgres(tmp_path: Path, pg_url: str) -> None:
    config = write_spec(tmp_path)
    state = tmp_path / "state"
    args = run_args(config, state, "--db", pg_url, "--lease-ttl", "2", seed=3)
    for delay in (2.0, 3.5, 5.0):
        p = start_campaign(*args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
    proc = run_cli(config, state, db=pg_url, extra=("--lease-ttl", "2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_consistent(state, pg_url)
