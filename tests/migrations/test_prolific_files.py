"""Upgrading a store whose Prolific campaigns kept their journal in files (the releases up to schema 0003).

The previous release wrote, per Prolific campaign, `<state>/<campaign>/prolific/prolific-journal.sqlite`
and `prolific-market.sqlite` with the schemas below (copied from it). Opening such a state folder with
this release migrates the store to 0004 and reads those files into it once; the files stay as they were.
The last test builds a state folder as the previous release leaves it mid-run (a Likert campaign on the
built-in marketplace and a prolific-local campaign killed right after paying a bonus, before recording
it), upgrades it, lets both finish, and checks that nothing was paid twice.
"""

from __future__ import annotations

import hashlib
import json
import signal
import sqlite3
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text
from sqlmodel import col, select

from campaign.migrations.prolific_files import import_campaign
from campaign.prolific.audit import audit_run, gather
from campaign.state import Keys, ProlificBonusState
from campaign.store import (
    HOOK_TABLES,
    PROLIFIC_TABLES,
    SCHEMA_HEAD,
    CampaignRow,
    HitRow,
    KVRow,
    LedgerRow,
    ProlificBonusRow,
    ProlificDecisionRow,
    ProlificHitTypeRow,
    ProlificPostedRow,
    ProlificStudyRow,
    ProlificVerdictRow,
    Store,
    StoreError,
    alembic_config,
)
from tests.support.cli import CRASH, clean_env, run_args, run_campaign
from tests.support.specs import campaign, first_propositions, simulated, write_spec

# The previous release's files, exactly (campaign/prolific/studies.py and campaign/marketplaces/prolific.py).
OLD_JOURNAL = """
CREATE TABLE IF NOT EXISTS studies (key TEXT PRIMARY KEY, internal_name TEXT NOT NULL UNIQUE, completion_code TEXT NOT NULL,
  study_id TEXT, state TEXT NOT NULL, places INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS decisions (submission_id TEXT PRIMARY KEY, action TEXT NOT NULL, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS bonuses (key TEXT PRIMARY KEY, study_id TEXT NOT NULL, submission_id TEXT NOT NULL,
  cents INTEGER NOT NULL, batch_id TEXT, state TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS bonus_checks (key TEXT PRIMARY KEY, since REAL NOT NULL);
"""
OLD_MARKET = """
CREATE TABLE IF NOT EXISTS posted (hit_id TEXT PRIMARY KEY, type_id TEXT NOT NULL, assignments INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS hit_types (type_id TEXT PRIMARY KEY, title TEXT NOT NULL, description TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS verdicts (assignment_id TEXT PRIMARY KEY, decision TEXT NOT NULL, reason TEXT NOT NULL);
"""
PREVIOUS = "0003"
NEW_TABLES = {str(t.__tablename__) for t in (*PROLIFIC_TABLES, *HOOK_TABLES)}  # the tables of the revisions after PREVIOUS


# -- the previous release's layout ------------------------------------------------------------------------------
def write_old_files(state: Path, name: str, journal: dict[str, Sequence[tuple[Any, ...]]],
                    market: dict[str, Sequence[tuple[Any, ...]]]) -> tuple[Path, Path]:
    """The campaign's two files as the previous release wrote them, rows in the order given."""
    folder = state / name / "prolific"
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / "prolific-journal.sqlite", folder / "prolific-market.sqlite"
    for path, schema, tables in ((paths[0], OLD_JOURNAL, journal), (paths[1], OLD_MARKET, market)):
        with closing(sqlite3.connect(path)) as conn:
            conn.executescript(schema)
            for table, rows in tables.items():
                for row in rows:
                    conn.execute(f"INSERT INTO {table} VALUES ({','.join('?' * len(row))})", row)
            conn.commit()
    return paths


def store_at_previous(url: str, names: Sequence[str]) -> None:
    """A store as the previous release creates it (schema 0003), holding campaigns `names`."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(url, conn), PREVIOUS)
            for name in names:
                conn.execute(text("INSERT INTO campaigns (name, fingerprint, spec_json, status, seed, budget, created_at) "
                                  "VALUES (:n, 'f', '{}', 'running', 1, '5.00', 1.0)"), {"n": name})
    finally:
        engine.dispose()


def to_previous_release(url: str, state: Path) -> dict[str, dict[str, list[tuple[Any, ...]]]]:
    """Turn a store of this release into the previous release's layout: the Prolific tables' rows written
    to each campaign's two files (the old schemas), the tables dropped, the version set back to 0003. The
    result has exactly the tables of a store the previous release made. Returns what was written, per
    campaign and file table."""
    engine = create_engine(url)
    written: dict[str, dict[str, list[tuple[Any, ...]]]] = {}
    try:
        with engine.begin() as conn:
            def rows(sql: str, name: str) -> list[tuple[Any, ...]]:
                return [tuple(r) for r in conn.execute(text(sql), {"c": name})]

            names = [str(n) for (n,) in conn.execute(text("SELECT DISTINCT campaign FROM prolific_studies"))]
            for name in names:
                bonuses = rows("SELECT key, study_id, submission_id, cents, batch_id, state, id FROM prolific_bonuses "
                               "WHERE campaign=:c ORDER BY id", name)
                journal = {
                    "studies": rows("SELECT key, internal_name, completion_code, study_id, state, places FROM prolific_studies "
                                    "WHERE campaign=:c ORDER BY id", name),
                    "decisions": rows("SELECT submission_id, action, state FROM prolific_decisions WHERE campaign=:c ORDER BY id", name),
                    "bonuses": [(*b[:6], seq) for seq, b in enumerate(bonuses, 1)],
                    "bonus_checks": rows("SELECT key, checking_since FROM prolific_bonuses WHERE campaign=:c "
                                         "AND checking_since IS NOT NULL ORDER BY id", name),
                }
                market = {
                    "posted": rows("SELECT hit_id, type_id, assignments FROM prolific_posted WHERE campaign=:c ORDER BY id", name),
                    "hit_types": rows("SELECT type_id, title, description FROM prolific_hit_types WHERE campaign=:c ORDER BY id", name),
                    "verdicts": rows("SELECT assignment_id, decision, reason FROM prolific_verdicts WHERE campaign=:c ORDER BY id", name),
                }
                write_old_files(state, name, journal, market)
                written[name] = journal | market
            for table in sorted(NEW_TABLES):
                conn.execute(text(f"DROP TABLE {table}"))
            conn.execute(text("DELETE FROM kv WHERE key = :k"), {"k": Keys.PROLIFIC_FILES_IMPORTED})
            conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": PREVIOUS})
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    fresh = create_engine("sqlite://")
    with fresh.begin() as conn:
        command.upgrade(alembic_config("sqlite://", conn), PREVIOUS)
        previous_tables = set(inspect(conn).get_table_names())
    assert tables == previous_tables, "not the previous release's schema"
    return written


def journal_in_store(store: Store, name: str) -> dict[str, list[tuple[Any, ...]]]:
    """The campaign's Prolific rows in the store, as the file tables hold them (bonus order as seq)."""
    with store.session() as s:
        def rows(model: Any, *cols: str) -> list[tuple[Any, ...]]:
            found = s.exec(select(model).where(model.campaign == name).order_by(col(model.id))).all()
            return [tuple(getattr(r, c) for c in cols) for r in found]

        bonuses = rows(ProlificBonusRow, "key", "study_id", "submission_id", "cents", "batch_id", "state", "checking_since")
        return {
            "studies": rows(ProlificStudyRow, "key", "internal_name", "completion_code", "study_id", "state", "places"),
            "decisions": rows(ProlificDecisionRow, "submission_id", "action", "state"),
            "bonuses": [(*b[:6], seq) for seq, b in enumerate(bonuses, 1)],
            "bonus_checks": [(b[0], b[6]) for b in bonuses if b[6] is not None],
            "posted": rows(ProlificPostedRow, "hit_id", "type_id", "assignments"),
            "hit_types": rows(ProlificHitTypeRow, "type_id", "title", "description"),
            "verdicts": rows(ProlificVerdictRow, "assignment_id", "decision", "reason"),
        }


def digest(paths: Sequence[Path]) -> list[str]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]


# -- a small journal, written by hand ------------------------------------------------------------------------
JOURNAL: dict[str, list[tuple[Any, ...]]] = {
    "studies": [("T-LIKERT", "campaign:T-LIKERT:aa11", "CAA11", "study-1", "published", 4),
                ("T-RANK", "campaign:T-RANK:bb22", "CBB22", None, "intent", 2)],
    "decisions": [("sub-2", "reject", "done"), ("sub-1", "approve", "intent")],
    "bonuses": [("work:sub-3", "study-1", "sub-3", 30, "batch-1", "paid", 1),
                ("bonus:APW1", "study-1", "sub-1", 20, "batch-2", "paying", 2),
                ("bonus:APW2", "study-1", "sub-2", 20, None, "intent", 3)],
    "bonus_checks": [("bonus:APW1", 1700000000.5)],
}
MARKET: dict[str, list[tuple[Any, ...]]] = {
    "posted": [("HIT2", "T-LIKERT", 3), ("HIT1", "T-LIKERT", 3)],
    "hit_types": [("T-LIKERT", "Rate statements", "How important is each statement?")],
    "verdicts": [("A1", "approve", ""), ("A2", "reject", "every check statement was rated wrongly")],
}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | None]:
    """None: the state folder's own SQLite store; else a PostgreSQL database (`--db`)."""
    yield request.getfixturevalue("pg_url") if request.param == "postgres" else None


def test_the_upgrade_reads_the_previous_release_files_once_and_leaves_them(tmp_path: Path, store_url: str | None) -> None:
    state = tmp_path / "state"
    state.mkdir()
    url = store_url or f"sqlite:///{state / 'campaign.db'}"
    store_at_previous(url, ["p", "plain"])
    files = write_old_files(state, "p", JOURNAL, MARKET)
    before = digest(files)
    store = Store.open(state, store_url)
    try:
        assert store.schema_version() == SCHEMA_HEAD
        assert journal_in_store(store, "p") == JOURNAL | MARKET  # every row, values and order as the files had them
        assert journal_in_store(store, "plain") == {k: [] for k in JOURNAL | MARKET}
        assert store.get_kv("p", Keys.PROLIFIC_FILES_IMPORTED) == "1" and store.get_kv("plain", Keys.PROLIFIC_FILES_IMPORTED) is None
        assert import_campaign(store.engine, state, "p") == 0  # read once
    finally:
        store.close()
    store = Store.open(state, store_url)  # and opening again reads nothing more
    try:
        assert journal_in_store(store, "p") == JOURNAL | MARKET
        with store.session() as s:
            assert len(s.exec(select(KVRow).where(KVRow.key == Keys.PROLIFIC_FILES_IMPORTED)).all()) == 1
    finally:
        store.close()
    assert digest(files) == before, "the previous release's files were changed"


def test_files_the_upgrade_did_not_see_are_read_when_the_campaign_opens(tmp_path: Path) -> None:
    """A shared store migrated by a daemon of another state folder: the campaign's own daemon reads its
    files when it opens it; a row the store holds already (written since) stands."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    elsewhere.mkdir()
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    store_at_previous(url, ["p"])
    write_old_files(here, "p", JOURNAL, MARKET)
    store = Store(url, elsewhere)
    try:
        assert journal_in_store(store, "p")["studies"] == []
        with store.session() as s:  # the campaign went on meanwhile: its ranking study was created since
            s.add(ProlificStudyRow(campaign="p", key="T-RANK", internal_name="campaign:T-RANK:bb22", completion_code="CBB22",
                                   study_id="study-2", state="published", places=2))
        copied = sum(len(v) for k, v in (JOURNAL | MARKET).items() if k != "bonus_checks")  # a check is a bonus's column
        assert import_campaign(store.engine, here, "p") == copied - 1
        found = journal_in_store(store, "p")
        assert found["studies"] == [("T-RANK", "campaign:T-RANK:bb22", "CBB22", "study-2", "published", 2), JOURNAL["studies"][0]]
        assert found["bonuses"] == JOURNAL["bonuses"] and found["verdicts"] == MARKET["verdicts"]
        assert import_campaign(store.engine, here, "p") == 0
        assert import_campaign(store.engine, elsewhere, "p") == 0  # no files there: nothing to do
    finally:
        store.close()


def test_an_unreadable_journal_stops_the_upgrade_and_changes_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    store_at_previous(f"sqlite:///{state / 'campaign.db'}", ["p"])
    journal, _ = write_old_files(state, "p", JOURNAL, MARKET)
    journal.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="prolific-journal.sqlite: cannot read the Prolific journal"):
        Store.open(state)
    engine = create_engine(f"sqlite:///{state / 'campaign.db'}")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == PREVIOUS
        assert not NEW_TABLES & set(inspect(conn).get_table_names())
    engine.dispose()


# -- a live campaign of the previous release, upgraded -------------------------------------------------------
PROLIFIC = {"reward": "0.75", "currency": "GBP", "bundle": 5, "estimated_minutes": 5, "maximum_minutes": 60, "devices": ["desktop"],
            "fee_rate": "0.333", "vat_rate": "0.2"}
LIKERT_STAGE = {"name": "likert", "kind": "likert", "auto_approval_delay": "1d",
                "traps": {"share": 0.2, "texts": ["This sentence is not important.", "Barack Obama graduated from Harvard Law."]}}
MIX = {"diligent": 0.7, "random_spammer": 0.15, "constant_spammer": 0.15}
LIKERT, PROLIFIC_NAME = "upgrade-likert", "upgrade-prolific"


def _run(config: Path, state: Path, crash: str | None = None) -> Any:
    return run_campaign(*run_args(config, state, seed=5), env=clean_env(["PROLIFIC_TOKEN"], **({CRASH: crash} if crash else {})),
                        timeout=420)


def _ro_rows(path: Path, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return [tuple(r) for r in conn.execute(sql, args).fetchall()]


@pytest.mark.slow
@pytest.mark.prolific
def test_live_campaigns_of_the_previous_release_are_upgraded_and_finish_paying_nothing_twice(tmp_path: Path) -> None:
    props = first_propositions(tmp_path, 12)
    config = write_spec(tmp_path / "campaigns.yaml",
                        campaign(LIKERT, marketplace="local", task={"kind": "likert"}, propositions=props, budget="20.00",
                                 quality={"bonus": "0.05"}, crowd=simulated(10, speed=600, arrival_span="30m")),
                        campaign(PROLIFIC_NAME, marketplace="prolific-local", prolific=PROLIFIC,
                                 task_site={"public_url": "http://127.0.0.1:0"}, stages=[LIKERT_STAGE],  # the demo's propositions: whole bundles
                                 quality={"bonus": "0.20", "max_excluded_share": 0.3}, budget="60.00",
                                 crowd=simulated(16, mix=MIX, speed=600, arrival_span="30m")))
    state = tmp_path / "state"
    # Mid-run: killed right after a bonus's pay call went out, before the journal recorded it ("paying").
    proc = _run(config, state, crash="prolific.after_pay:1")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    url = f"sqlite:///{state / 'campaign.db'}"
    written = to_previous_release(url, state)[PROLIFIC_NAME]
    assert [b[5] for b in written["bonuses"]].count(ProlificBonusState.PAYING) == 1
    assert written["studies"] and written["decisions"] and written["posted"] and written["verdicts"]
    with closing(sqlite3.connect(state / "campaign.db")) as conn:
        statuses = dict(conn.execute("SELECT name, status FROM campaigns").fetchall())
    assert statuses == {LIKERT: "running", PROLIFIC_NAME: "running"}, "not both campaigns mid-run"
    files = [state / PROLIFIC_NAME / "prolific" / f for f in ("prolific-journal.sqlite", "prolific-market.sqlite")]
    before = digest(files)

    store = Store.open(state)  # the new release's first open: migrated, the files read in
    try:
        assert store.schema_version() == SCHEMA_HEAD
        assert journal_in_store(store, PROLIFIC_NAME) == written
        with store.session() as s:
            planned = {h.hit_key for h in s.exec(select(HitRow).where(HitRow.campaign == LIKERT)).all()}
    finally:
        store.close()
    assert planned

    proc = _run(config, state)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert digest(files) == before, "the run wrote to the previous release's files"
    for name in (LIKERT, PROLIFIC_NAME):
        assert (state / name / "scores.jsonl").read_text(encoding="utf-8").strip()

    store = Store.open(state, create=False)
    try:
        with store.session() as s:
            assert {c.name: c.status for c in s.exec(select(CampaignRow)).all()} == {LIKERT: "finished", PROLIFIC_NAME: "finished"}
            ledger = s.exec(select(LedgerRow)).all()
            likert_hits = {h.hit_id for h in s.exec(select(HitRow).where(HitRow.campaign == LIKERT)).all() if h.hit_id}
            paying = s.exec(select(ProlificBonusRow).where(ProlificBonusRow.campaign == PROLIFIC_NAME,
                                                           ProlificBonusRow.key == next(b[0] for b in written["bonuses"]
                                                                                        if b[5] == ProlificBonusState.PAYING))).one()
        # Prolific: the audit (decisions, bonuses, places charged, the ledger to the penny) ...
        findings = audit_run(state, PROLIFIC_NAME, store)
        assert findings == [], "\n".join(f"{f.check} {f.subject}: {f.detail}" for f in findings)
        facts = gather(emulator_db=state / "prolific" / "prolific.db", door_db=state / "prolific-site" / "prolific-site.sqlite",
                       market_db=state / "market" / "market.db", store=store, campaign=PROLIFIC_NAME)
    finally:
        store.close()
    # ... over every study on Prolific: none made again for a stage whose study the files knew
    emulator = state / "prolific" / "prolific.db"
    on_prolific = {str(i) for (i,) in _ro_rows(emulator, "SELECT id FROM docs WHERE kind='study'")}
    assert on_prolific == facts.studies == {s[3] for s in written["studies"] if s[3]}
    assert paying.state == ProlificBonusState.PAID and facts.batches_paid[str(paying.batch_id)] == 1
    assert all(n <= 1 for (n,) in ((json.loads(b).get("times_paid") or 0,) for (b,) in
                                   _ro_rows(emulator, "SELECT body FROM docs WHERE kind='bonus'")))
    assert facts.reward_charges and any(facts.bonus_payments.values())

    # Likert on the built-in marketplace: each approval and bonus there booked once in the ledger, and nothing else.
    market = state / "market" / "market.db"
    hits = sorted(likert_hits)
    approved = [str(a) for (a,) in _ro_rows(market, f"SELECT id FROM assignments WHERE status='Approved' AND hit_id IN "
                                                    f"({','.join('?' * len(hits))})", hits)]
    bonused = [str(a) for (a,) in _ro_rows(market, f"SELECT assignment_id FROM bonuses WHERE hit_id IN ({','.join('?' * len(hits))})",
                                           hits)]
    charges = [e.assignment_id for e in ledger if e.campaign == LIKERT and e.kind == "charge"]
    bonus_charges = [e.assignment_id for e in ledger if e.campaign == LIKERT and e.kind == "bonus_charge"]
    assert approved and sorted(charges) == sorted(approved) and max(Counter(charges).values()) == 1
    assert bonused and sorted(bonus_charges) == sorted(bonused) and max(Counter(bonused).values()) == 1
