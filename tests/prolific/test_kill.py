"""SIGKILL a Prolific campaign (`marketplace: prolific-local`) between each remote Prolific call and its
record, and at random instants; a restart then finishes it, and nothing happened twice.

As tests/test_e2e.py does for MTurk: `CAMPAIGN_TEST_CRASH=point:count` kills the daemon (and with it the
in-process emulator, task site and simulated participants) the count-th time it reaches a crash point of
`campaign.prolific.studies`. After the restart has finished the campaign, `campaign.prolific.audit`
reads the emulator, the door, the task site and the store (the journal is in it): no submission decided
twice, no bonus paid twice, no participant served the same HIT twice, the ledger equal to Prolific's
charges to the cent, no HIT the task site lacks. The daemon resumes from the store alone: besides it the
state folder holds only the servers' own databases (the emulator's, Prolific's side; the built-in
marketplace's and its door's, the task site's), never a file of the campaign's.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from sqlmodel import select

from campaign.prolific.audit import audit_run, gather
from campaign.state import ProlificBonusState
from campaign.store import ProlificBonusRow, Store
from tests.support.cli import CRASH, clean_env, kill_at, run_args, run_campaign
from tests.support.specs import campaign, simulated
from tests.support.specs import write_spec as write_campaigns

pytestmark = [pytest.mark.prolific, pytest.mark.slow]

NAME = "kill-prolific"
PROLIFIC = {"reward": "0.75", "currency": "GBP", "bundle": 5, "estimated_minutes": 5, "maximum_minutes": 60, "devices": ["desktop"],
            "fee_rate": "0.333", "vat_rate": "0.2"}
# A held rejection goes out at half the auto-approval delay, and until it does the last slots can wait for a
# place (a place held by a participant with nothing left to do counts as capacity in
# `ProlificMarketplace._places_wanted`): at speed 600 the default 3 days held a run 3.6 minutes.
LIKERT = {"name": "likert", "kind": "likert", "auto_approval_delay": "1d",
          "traps": {"share": 0.2, "texts": ["This sentence is not important.", "Barack Obama graduated from Harvard Law."]}}
MIX = {"diligent": 0.7, "random_spammer": 0.15, "constant_spammer": 0.15}


def write_spec(tmp: Path) -> Path:
    return write_campaigns(tmp / "campaigns.yaml", campaign(
        NAME, marketplace="prolific-local", prolific=PROLIFIC, task_site={"public_url": "http://127.0.0.1:0"}, stages=[LIKERT],
        quality={"bonus": "0.20", "max_excluded_share": 0.3}, budget="60.00",
        crowd=simulated(16, mix=MIX, speed=600, arrival_span="30m")))


def run_cli(config: Path, state: Path, crash: str | None = None, timeout: float = 420,
            db: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_campaign(*run_args(config, state, *(["--db", db] if db else []), seed=5),
                        env=clean_env(["PROLIFIC_TOKEN"], **({CRASH: crash} if crash else {})), timeout=timeout)


# Every database a run keeps in its state folder: the store, and the servers' own state.
SERVERS_DBS = {"campaign.db", "market/market.db", "market/auth.db", "prolific/prolific.db", "prolific-site/prolific-site.sqlite"}


def databases(state: Path) -> set[str]:
    """The databases under `state` (SQLite's side files left out), relative to it."""
    return {p.relative_to(state).as_posix() for p in state.rglob("*") if p.is_file()
            and p.suffix in (".db", ".sqlite", ".sqlite3") and not p.name.endswith(("-wal", "-shm", "-journal"))}


def check_once(state: Path, db: str | None = None) -> None:
    """The finished campaign, audited; and the audit had something to look at."""
    assert databases(state) == SERVERS_DBS - ({"campaign.db"} if db else set()), "the campaign kept state outside the store"
    assert not (state / NAME / "prolific").exists()
    store = Store.open(state, db, create=False)
    try:
        findings = audit_run(state, NAME, store)
        assert findings == [], "\n".join(f"{f.check} {f.subject}: {f.detail}" for f in findings)
        facts = gather(emulator_db=state / "prolific" / "prolific.db",
                       door_db=state / "prolific-site" / "prolific-site.sqlite", market_db=state / "market" / "market.db",
                       store=store, campaign=NAME)
    finally:
        store.close()
    approvals = [d for d in facts.decisions if d[1] == "APPROVE"]
    assert approvals and facts.reward_charges, "no submission was approved: the audit checked nothing"
    assert facts.served and facts.charged_minor > 0
    assert any(facts.bonus_payments.values()), "no bonus was paid: the bonus windows were not exercised"
    # Directly too, not only through the audit: each participant's HITs, from the task site's own records.
    with sqlite3.connect(f"file:{state / 'market' / 'market.db'}?mode=ro", uri=True) as m:
        dup = m.execute("SELECT worker_id, hit_id, COUNT(*) FROM assignments WHERE worker_id LIKE 'AP%' "
                        "AND status NOT IN ('Abandoned', 'Returned') GROUP BY worker_id, hit_id HAVING COUNT(*) > 1").fetchall()
    assert dup == [], f"a participant was served the same HIT twice: {dup}"
    scores = state / NAME / "scores.jsonl"
    assert scores.is_file() and [json.loads(line) for line in scores.read_text(encoding="utf-8").splitlines()]


# Each window between a Prolific call and its record (campaign/prolific/studies.py), the one between a
# decision on the task site and its verdict on Prolific (campaign/marketplaces/prolific.py), at a first
# and a later passage. Two windows are not aimed at because this campaign does not reliably pass them:
# `prolific.after_stop` (STOP is called only for a study still open when its stage completes; here its
# places have all been taken by then) and `prolific.after_places` (places are raised only when work runs
# short of places, which depends on how many participants time out); tests/prolific/test_studies.py
# crashes the journal after both calls in-process, and the random instants may fall anywhere.
POINTS = ["prolific.after_create_study:1", "prolific.after_publish:1", "prolific.before_verdict:3",
          "prolific.before_decision:2", "prolific.after_decision:1", "prolific.after_decision:5",
          "prolific.after_create_bonus:1", "prolific.before_pay:2", "prolific.after_pay:1"]


def crash_then_resume(config: Path, state: Path, point: str) -> None:
    """A run killed at `point`, then a run to the end from the same store: nothing paid or decided twice."""
    proc = run_cli(config, state, crash=point)
    assert proc.returncode == -signal.SIGKILL, f"expected a crash at {point}; rc={proc.returncode}\n{proc.stderr[-3000:]}"
    proc = run_cli(config, state)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_once(state)


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_between_a_prolific_call_and_its_record(tmp_path: Path, point: str) -> None:
    config = write_spec(tmp_path)
    state = tmp_path / "state"
    crash_then_resume(config, state, point)


def test_sigkill_at_random_instants(tmp_path: Path) -> None:
    config = write_spec(tmp_path)
    state = tmp_path / "state"
    kill_at(run_args(config, state, seed=5), (2.0, 3.5, 5.0, 6.5), env=clean_env(["PROLIFIC_TOKEN"]))
    proc = run_cli(config, state)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_once(state)


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_daemon_killed_mid_run_resumes_from_the_store_alone(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    """Killed right after a bonus's pay call, before its record (the journal says "paying"): what the
    restart has to go on is the store and the servers' databases, nothing else of the campaign's; it
    reconciles the bonus with Prolific instead of paying it again, and finishes."""
    db = request.getfixturevalue("pg_url") if backend == "postgres" else None
    config = write_spec(tmp_path)
    state = tmp_path / "state"
    proc = run_cli(config, state, crash="prolific.after_pay:1", db=db)
    assert proc.returncode == -signal.SIGKILL, f"rc={proc.returncode}\n{proc.stderr[-3000:]}"
    assert databases(state) == SERVERS_DBS - ({"campaign.db"} if db else set())
    store = Store.open(state, db, create=False)
    try:
        with store.session() as s:
            paying = s.exec(select(ProlificBonusRow).where(ProlificBonusRow.campaign == NAME,
                                                           ProlificBonusRow.state == ProlificBonusState.PAYING)).all()
    finally:
        store.close()
    assert len(paying) == 1 and paying[0].batch_id, "the kill did not leave a bonus between its pay call and its record"
    proc = run_cli(config, state, db=db)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_once(state, db)
    store = Store.open(state, db, create=False)
    try:
        facts = gather(emulator_db=state / "prolific" / "prolific.db", door_db=state / "prolific-site" / "prolific-site.sqlite",
                       market_db=state / "market" / "market.db", store=store, campaign=NAME)
        with store.session() as s:
            row = s.get(ProlificBonusRow, paying[0].id)
    finally:
        store.close()
    assert row is not None and row.state == ProlificBonusState.PAID
    assert facts.batches_paid[str(paying[0].batch_id)] == 1, "the bonus paid before the kill was paid again"


def write_replacing_spec(tmp: Path) -> Path:
    """The same campaign asking again for excluded and rejected answers (`quality.replace_excluded`)."""
    return write_campaigns(tmp / "campaigns.yaml", campaign(
        NAME, marketplace="prolific-local", prolific=PROLIFIC, task_site={"public_url": "http://127.0.0.1:0"}, stages=[LIKERT],
        quality={"bonus": "0.20", "max_excluded_share": 0.3, "replace_excluded": True}, budget="60.00",
        crowd=simulated(16, mix=MIX, speed=600, arrival_span="30m")))


# this campaign opens places five times (seed 5): 12, 14, 15, then the first replacements, 16, 17
@pytest.mark.parametrize("point", ["prolific.add_assignments.after_call:1", "prolific.add_assignments.after_call:9",
                                   "places.before_call:4", "places.after_call:4"])
def test_sigkill_while_replacing_excluded_work(tmp_path: Path, point: str) -> None:
    """Killed after the task site added a HIT's slots and before the study's count was written (the first
    round, and one of the second), or around opening the places for them (reserved, not opened; opened,
    not recorded): the restart adds nothing twice (every HIT's count on the task site is the store's),
    opens the places, and the audit (each submission decided and charged once, the ledger equal to
    Prolific's charges) finds nothing."""
    config = write_replacing_spec(tmp_path)
    state = tmp_path / "state"
    crash_then_resume(config, state, point)
    from campaign.store import EventRow, HitRow, ProlificPostedRow

    store = Store.open(state, None, create=False)
    try:
        with store.session() as s:
            assert s.exec(select(EventRow).where(EventRow.kind == "replacements")).first() is not None
            ours = {h.hit_id: h.assignments for h in s.exec(select(HitRow)).all()}
            posted = {p.hit_id: p.assignments for p in s.exec(select(ProlificPostedRow)).all()}
    finally:
        store.close()
    assert posted == ours and sum(ours.values()) > 0
    with sqlite3.connect(f"file:{state / 'market' / 'market.db'}?mode=ro", uri=True) as m:
        site = dict(m.execute("SELECT id, max_assignments FROM hits").fetchall())
    assert {h: site[h] for h in ours} == ours  # the task site added each round's slots once
