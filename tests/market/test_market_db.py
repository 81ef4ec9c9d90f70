"""The marketplace database's schema version: new files, upgrades of unversioned files, newer files refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from campaign.market.db import SCHEMA, SCHEMA_VERSION, Database, SchemaError


def _version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def test_new_database_has_current_version(tmp_path: Path) -> None:
    db = Database(tmp_path)
    db.close()
    assert SCHEMA_VERSION >= 2
    assert _version(tmp_path / "market.db") == SCHEMA_VERSION


def test_unversioned_database_is_upgraded_with_its_data(tmp_path: Path) -> None:
    path = tmp_path / "market.db"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA)  # the first release's layout, which never set user_version
    conn.execute("INSERT INTO qual_types (id, requester, name, description, status, creation) "
                 "VALUES ('QT1', 'R', 'Skilled', 'd', 'Active', 1.0)")
    reqs = [{"QualificationTypeId": "QT1", "Comparator": "Exists"}]
    conn.execute("INSERT INTO hit_types (id, requester, title, description, reward_cents, duration, auto_approval, quals) "
                 "VALUES ('HT1', 'R', 't', 'd', 5, 60, 60, ?)", (json.dumps(reqs),))
    conn.commit()
    conn.close()
    assert _version(path) == 0

    db = Database(tmp_path)
    try:
        c = db.conn
        assert c.execute("SELECT name, disposed FROM qual_types WHERE id='QT1'").fetchone()[:] == ("Skilled", 0)
        assert c.execute("SELECT qual_type_id, hit_type_id FROM hit_type_quals").fetchall()[0][:] == ("QT1", "HT1")
        assert c.execute("SELECT disposed FROM hit_types WHERE id='HT1'").fetchone()[0] == 0
        # Names stay unique among live types only: a disposed type frees its name.
        with pytest.raises(sqlite3.IntegrityError):
            c.execute("INSERT INTO qual_types (id, requester, name, description, status, creation) "
                      "VALUES ('QT2', 'R', 'Skilled', 'd', 'Active', 2.0)")
        c.execute("UPDATE qual_types SET disposed=1 WHERE id='QT1'")
        c.execute("INSERT INTO qual_types (id, requester, name, description, status, creation) "
                  "VALUES ('QT2', 'R', 'Skilled', 'd', 'Active', 2.0)")
    finally:
        db.close()
    assert _version(path) == SCHEMA_VERSION
    Database(tmp_path).close()  # opening an up-to-date file again changes nothing and does not fail


def test_newer_version_is_refused_clearly(tmp_path: Path) -> None:
    Database(tmp_path).close()
    path = tmp_path / "market.db"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 5}")
    with pytest.raises(SchemaError) as err:
        Database(tmp_path)
    msg = str(err.value)
    assert str(path) in msg and str(SCHEMA_VERSION + 5) in msg and "upgrade campaign" in msg
    assert _version(path) == SCHEMA_VERSION + 5  # untouched


def test_checkpoints_let_the_wal_start_over_under_a_steady_stream_of_writes(tmp_path: Path, monkeypatch) -> None:
    """Background checkpoints (no checkpoint inside a request's COMMIT) still keep the WAL from growing
    without end: a write after a complete checkpoint starts the WAL over, so the file stops growing."""
    import threading

    from campaign.market import db as dbmod

    monkeypatch.setattr(dbmod, "CATCH_UP_FRAMES", 0)  # catch up on every round (normally once 4,096 frames wait)
    db = Database(tmp_path)
    wal = tmp_path / "market.db-wal"
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            with db.transaction() as c:
                c.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (f"k{i}", "x" * 2000))
            i += 1

    try:
        t = threading.Thread(target=writer)
        t.start()
        try:
            completed = [db.checkpoint() for _ in range(20)]  # beside the writer, as the checkpointer thread runs it
            size = wal.stat().st_size
        finally:
            stop.set()
            t.join()
        assert all(completed)  # the short pass under the write lock catches up with the stream every time
        assert size < 64 * 1024 * 1024
        assert db.checkpoint()  # with the writer gone it completes
        with db.transaction() as c:
            c.execute("INSERT INTO meta (key, value) VALUES ('last', 'x')")
        assert db.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1] <= 2  # started over: one short commit
    finally:
        db.close()
