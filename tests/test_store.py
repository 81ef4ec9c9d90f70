"""The store's schema version: migrations on SQLite and PostgreSQL, old stores opened, newer and damaged
ones refused with a message (and exit 2 from the commands), read-only opens that create nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlmodel import SQLModel

from campaign.store import (
    BASELINE,
    HOOK_TABLES,
    PROLIFIC_TABLES,
    SCHEMA_HEAD,
    STORE_TABLES,
    CampaignRow,
    EventRow,
    Store,
    StoreError,
    schema_head,
)
from tests.support.cli import cli
from tests.support.paths import ROOT


def schema_diff(store: Store) -> list:
    """What the migrated schema lacks or has beyond the models (empty when they agree)."""
    metadata = SQLModel.metadata
    with store.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True, "include_object": lambda o, n, t, r, c: t != "table" or n in STORE_TABLES})
        return compare_metadata(ctx, metadata)


def legacy_store(url: str) -> None:
    """A store as the previous version left it: `create_all`, no version table, some rows."""
    engine = create_engine(url)
    later = {"leases", "held", *(str(t.__tablename__) for t in (*PROLIFIC_TABLES, *HOOK_TABLES))}  # tables of the revisions after the baseline
    SQLModel.metadata.create_all(engine, tables=[t for n, t in SQLModel.metadata.tables.items() if n in STORE_TABLES - later])
    with engine.begin() as conn:
        conn.execute(CampaignRow.__table__.insert(), [{"name": "old", "fingerprint": "f", "spec_json": "{}", "status": "finished",  # type: ignore[attr-defined]
                                                         "seed": 1, "budget": "5.00", "created_at": 1.0}])
    engine.dispose()


def set_version(url: str, version: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": version})
    engine.dispose()


# --- SQLite ----------------------------------------------------------------------------------------------

def test_a_new_store_is_built_by_the_migrations_and_matches_the_models(tmp_path):
    store = Store.open(tmp_path)
    assert store.schema_version() == schema_head()
    assert STORE_TABLES <= set(inspect(store.engine).get_table_names())
    assert schema_diff(store) == []
    store.close()


def test_a_store_from_the_previous_version_is_stamped_and_kept(tmp_path):
    legacy_store(f"sqlite:///{tmp_path / 'campaign.db'}")
    store = Store.open(tmp_path)
    assert store.schema_version() == schema_head()
    with store.session() as s:
        assert s.get(CampaignRow, "old").budget == "5.00"
    assert schema_diff(store) == []
    store.close()
    assert BASELINE == "0001"


def test_a_newer_store_is_refused_and_commands_exit_2(tmp_path, capsys):
    Store.open(tmp_path).close()
    set_version(f"sqlite:///{tmp_path / 'campaign.db'}", "9999_future")
    with pytest.raises(StoreError, match=r"schema version '9999_future' is newer than this campaign knows \(it knows up to '" + SCHEMA_HEAD + r"'\)"):
        Store.open(tmp_path)
    assert cli("status", "--state", str(tmp_path)) == 2
    assert "newer than this campaign knows" in capsys.readouterr().err
    spec = ROOT / "campaigns.yaml"
    assert cli("run", "--config", str(spec), "--state", str(tmp_path), "--quiet") == 2
    assert "newer than this campaign knows" in capsys.readouterr().err


def test_read_only_open_of_a_missing_store_creates_nothing(tmp_path):
    state = tmp_path / "state"
    with pytest.raises(StoreError, match="no store at .*campaign.db"):
        Store.open(state, create=False)
    assert not state.exists()
    with pytest.raises(StoreError, match="no store at"):
        Store.open(state, f"sqlite:///{tmp_path / 'other.db'}", create=False)
    assert list(tmp_path.iterdir()) == []
    Store.open(state).close()
    Store.open(state, create=False).close()


def _filled(tmp_path: Path) -> Path:
    store = Store.open(tmp_path)
    with store.session() as s:
        for i in range(3000):
            s.add(EventRow(campaign="c", kind="k", message="x" * 200 + str(i)))
    store.close()
    db = tmp_path / "campaign.db"
    with sqlite3.connect(db) as conn:  # fold the WAL into the file, as a cleanly stopped daemon leaves it
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db


@pytest.mark.parametrize("damage", ["truncated", "garbage", "torn page"])
def test_a_damaged_store_says_what_is_damaged_and_commands_exit_2(tmp_path, capsys, damage):
    db = _filled(tmp_path)
    data = db.read_bytes()
    if damage == "truncated":
        db.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        db.write_bytes(b"this is not a database" * 100)
    else:
        db.write_bytes(data[:8192] + b"\xff" * 4096 + data[12288:])
    with pytest.raises(StoreError, match=r"campaign.db: the store is damaged or not a campaign store \(.+\); restore it"):
        Store.open(tmp_path)
    assert cli("status", "--state", str(tmp_path)) == 2
    err = capsys.readouterr().err
    assert "the store is damaged" in err and "Traceback" not in err


def test_a_sound_store_that_cannot_be_written_is_not_called_damaged(tmp_path, monkeypatch):
    """A state folder on a read-only disk (a backup, another user's copy): SQLite cannot open it ("unable
    to open database file": it writes -wal/-shm files beside a store even to read it), and every command
    said the store was damaged and to restore it from a backup or move it away. Checked by hand on a
    read-only bind mount (`campaign status` and `pause`); here os.access says the folder is not writable,
    since root may write anywhere and a read-only mount needs privileges CI may not have."""
    import os

    _filled(tmp_path)
    store = Store.open(tmp_path)
    try:
        assert "the store is damaged" in store._damaged("database disk image is malformed")
        real = os.access
        monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if mode == os.W_OK else real(path, mode, **kw))
        said = store._damaged("unable to open database file")
    finally:
        store.close()
    assert "cannot open the store (unable to open database file): it or its folder is not writable" in said
    assert "damaged" not in said and "move it away" not in said


# --- PostgreSQL ------------------------------------------------------------------------------------------

@pytest.mark.postgres
def test_postgres_new_legacy_and_newer_stores(pg_server_session):
    url = pg_server_session.create_database()
    store = Store(url)
    assert store.schema_version() == schema_head()
    assert schema_diff(store) == []
    with store.session() as s:
        s.add(CampaignRow(name="c", fingerprint="f", spec_json="{}"))
    store.close()
    assert "postgresql" in url and Store(url).schema_version() == schema_head()

    legacy = pg_server_session.create_database()
    legacy_store(legacy)
    store = Store(legacy)
    assert store.schema_version() == schema_head() and schema_diff(store) == []
    with store.session() as s:
        assert s.get(CampaignRow, "old").status == "finished"
    store.close()

    set_version(legacy, "9999_future")
    with pytest.raises(StoreError, match="newer than this campaign knows") as exc:
        Store(legacy)
    assert "postgres@127.0.0.1" in str(exc.value)


@pytest.mark.postgres
def test_pg_url_fixture_gives_an_empty_database(pg_url):
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        assert conn.execute(text("select 1")).scalar() == 1
        assert inspect(conn).get_table_names() == []
    engine.dispose()


OPEN_AT = """
import sys, time
from campaign.store import Store
at = float(sys.argv[2])
time.sleep(max(0.0, at - time.time()))  # every process opens the store at the same instant
store = Store.open(sys.argv[3], sys.argv[1])
print(store.schema_version())
store.close()
"""


@pytest.mark.postgres
def test_daemons_opening_a_fresh_server_database_at_once_all_start(pg_server_session, tmp_path):
    """Several daemons started together on an empty PostgreSQL database: one creates the tables, the others
    wait for it and find them (without the lock the losers died on "relation already exists")."""
    import subprocess
    import sys
    import time

    from campaign.store import SCHEMA_HEAD

    for attempt in range(3):
        url = pg_server_session.create_database()
        at = time.time() + 2.0
        procs = [subprocess.Popen([sys.executable, "-c", OPEN_AT, url, str(at), str(tmp_path / f"s{attempt}-{i}")],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0] * 4, [err[-1500:] for _, err in outs]
        assert [out.strip() for out, _ in outs] == [SCHEMA_HEAD] * 4


def test_the_known_head_is_the_newest_migration():
    from campaign.store import SCHEMA_HEAD, _script

    assert _script().get_heads() == [SCHEMA_HEAD]


def test_an_old_store_is_migrated_through_a_later_revision(tmp_path, monkeypatch):
    """The chain after the baseline runs: a copy of the migrations with one more revision adding a column."""
    import shutil

    import campaign.store as store_module

    scripts = tmp_path / "migrations"
    shutil.copytree(Path(store_module.__file__).parent / "migrations", scripts, ignore=shutil.ignore_patterns("__pycache__"))
    (scripts / "versions" / "0099_kv_note.py").write_text(
        '"""Add kv.note."""\n'
        "import sqlalchemy as sa\nfrom alembic import op\n\n"
        f"revision = '0099'\ndown_revision = '{SCHEMA_HEAD}'\nbranch_labels = None\ndepends_on = None\n\n\n"
        "def upgrade():\n    with op.batch_alter_table('kv') as b:\n        b.add_column(sa.Column('note', sa.String(), nullable=True))\n\n\n"
        "def downgrade():\n    with op.batch_alter_table('kv') as b:\n        b.drop_column('note')\n",
        encoding="utf-8")
    real_config = store_module.alembic_config

    def config(url=None, connection=None, state_dir=None):
        cfg = real_config(url, connection, state_dir)
        cfg.set_main_option("script_location", str(scripts))
        return cfg

    monkeypatch.setattr(store_module, "alembic_config", config)
    monkeypatch.setattr(store_module, "SCHEMA_HEAD", "0099")
    store_module._script.cache_clear()
    try:
        state = tmp_path / "state"
        state.mkdir()
        legacy_store(f"sqlite:///{state / 'campaign.db'}")
        store = Store.open(state)
        assert store.schema_version() == "0099"
        assert "note" in {c["name"] for c in inspect(store.engine).get_columns("kv")}
        with store.session() as s:
            assert s.get(CampaignRow, "old") is not None
        store.close()
    finally:
        store_module._script.cache_clear()


def test_a_first_open_killed_mid_migration_leaves_no_half_built_store(tmp_path, monkeypatch):
    """SQLite runs CREATE TABLE outside a transaction unless one is begun: a first `campaign run` killed
    while building its store left some tables and no version, and the next open stamped that as the
    complete baseline (later: "no such table: ledger"). The migration is one transaction."""
    from alembic import op

    real, made = op.create_table, []

    def dying(name, *cols, **kw):
        if len(made) == 3:
            raise KeyboardInterrupt("killed mid-migration")
        made.append(name)
        return real(name, *cols, **kw)

    monkeypatch.setattr(op, "create_table", dying)
    with pytest.raises(KeyboardInterrupt):
        Store.open(tmp_path)
    monkeypatch.setattr(op, "create_table", real)
    tables = set(inspect(create_engine(f"sqlite:///{tmp_path / 'campaign.db'}")).get_table_names())
    assert not tables & STORE_TABLES, f"a killed migration left {sorted(tables)}"
    store = Store.open(tmp_path)
    try:
        with store.engine.connect() as conn:
            assert STORE_TABLES <= set(inspect(conn).get_table_names())
    finally:
        store.close()


def _swaps(store: Store) -> None:
    assert store.swap_kv("c", "k", None, "1")  # absent: made
    assert not store.swap_kv("c", "k", None, "2")  # present: a second maker keeps the first
    assert not store.swap_kv("c", "k", "9", "3")  # not what it holds: unchanged
    assert store.get_kv("c", "k") == "1"
    assert store.swap_kv("c", "k", "1", "4") and store.get_kv("c", "k") == "4"
    with store.session() as s:  # inside a caller's session, its other writes kept
        store.set_kv("c", "other", "x", session=s)
        assert not store.swap_kv("c", "other2", "y", "z", session=s)
        assert store.swap_kv("c", "other2", None, "z", session=s)
    assert store.get_kv("c", "other") == "x" and store.get_kv("c", "other2") == "z"


def test_swap_kv_writes_only_over_what_the_caller_saw(tmp_path):
    store = Store.open(tmp_path)
    try:
        _swaps(store)
    finally:
        store.close()


@pytest.mark.postgres
def test_swap_kv_on_postgres(pg_url, tmp_path):
    store = Store.open(tmp_path, pg_url)
    try:
        _swaps(store)
    finally:
        store.close()
