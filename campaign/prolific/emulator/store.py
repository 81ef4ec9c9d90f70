"""The emulator's state: one SQLite file of JSON documents, one transaction per request.

Prolific's objects (workspaces, projects, studies, submissions, groups, bonus batches) are documents
with many optional fields that clients echo back, so they are stored whole as JSON; the few columns
that requests select on (kind, parent, owner) are real columns with an index. One connection behind
one lock: a request that fails rolls back completely and a restart finds exactly what the last
committed request left.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from campaign.filemodes import private_db

SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs (
  kind TEXT NOT NULL, id TEXT NOT NULL, parent TEXT NOT NULL DEFAULT '', owner TEXT NOT NULL DEFAULT '',
  seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (kind, id));
CREATE INDEX IF NOT EXISTS docs_parent ON docs (kind, parent, seq);
CREATE INDEX IF NOT EXISTS docs_owner ON docs (kind, owner, seq);
CREATE TABLE IF NOT EXISTS charges (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, workspace TEXT NOT NULL, study TEXT NOT NULL, ref TEXT NOT NULL,
  what TEXT NOT NULL, rewards INTEGER NOT NULL, fees INTEGER NOT NULL, vat INTEGER NOT NULL, at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS charges_study ON charges (study, what);
"""


ROLLED_BACK = "*rolled back*"  # told to `on_put` when a transaction's writes are undone


class NewerSchema(RuntimeError):
    """The file was written by a newer version of the emulator; opening it could lose data."""


class DocStore:
    def __init__(self, path: Path) -> None:
        self._conn = sqlite3.connect(str(private_db(path)), check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._lock = threading.RLock()
        self.on_put: Callable[[str], None] | None = None  # told the kind of every document written
        # told (kind, document) before each write, while the old version can still be read (hook events)
        self.before_put: Callable[[str, dict[str, Any]], None] | None = None
        self._conn.executescript(SCHEMA)
        row = self._conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            self._conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) > SCHEMA_VERSION:
            raise NewerSchema(f"{path} has schema version {row[0]}; this emulator knows up to {SCHEMA_VERSION}")

    @contextmanager
    def transaction(self) -> Iterator[DocStore]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self
            except BaseException:
                self._conn.execute("ROLLBACK")
                if self.on_put is not None:  # what was written is gone: whoever keeps track must look again
                    self.on_put(ROLLED_BACK)
                raise
            self._conn.execute("COMMIT")

    def get(self, kind: str, doc_id: str) -> dict[str, Any] | None:
        row = self._conn.execute("SELECT body FROM docs WHERE kind=? AND id=?", (kind, doc_id)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, kind: str, doc: dict[str, Any], parent: str = "", owner: str = "") -> None:
        if self.on_put is not None:
            self.on_put(kind)
        if self.before_put is not None:
            self.before_put(kind, doc)
        body = json.dumps(doc, sort_keys=True)
        cur = self._conn.execute("UPDATE docs SET body=? WHERE kind=? AND id=?", (body, kind, doc["id"]))
        if cur.rowcount == 0:
            seq = self._conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM docs WHERE kind=?", (kind,)).fetchone()[0]
            self._conn.execute("INSERT INTO docs (kind, id, parent, owner, seq, body) VALUES (?,?,?,?,?,?)",
                               (kind, doc["id"], parent, owner, seq, body))

    def delete(self, kind: str, doc_id: str) -> None:
        self._conn.execute("DELETE FROM docs WHERE kind=? AND id=?", (kind, doc_id))

    def children(self, kind: str, parent: str) -> list[dict[str, Any]]:
        rows = self._conn.execute("SELECT body FROM docs WHERE kind=? AND parent=? ORDER BY seq", (kind, parent))
        return [json.loads(r[0]) for r in rows]

    def owned(self, kind: str, owner: str) -> list[dict[str, Any]]:
        rows = self._conn.execute("SELECT body FROM docs WHERE kind=? AND owner=? ORDER BY seq", (kind, owner))
        return [json.loads(r[0]) for r in rows]

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [json.loads(r[0]) for r in self._conn.execute("SELECT body FROM docs WHERE kind=? ORDER BY seq", (kind,))]

    def charge(self, workspace: str, study: str, ref: str, what: str, rewards: int, fees: int, vat: int, at: float) -> None:
        self._conn.execute("INSERT INTO charges (workspace, study, ref, what, rewards, fees, vat, at) VALUES (?,?,?,?,?,?,?,?)",
                           (workspace, study, ref, what, rewards, fees, vat, at))

    def charged(self, *, workspace: str | None = None, study: str | None = None, what: str | None = None) -> tuple[int, int, int]:
        sql, args = "SELECT COALESCE(SUM(rewards),0), COALESCE(SUM(fees),0), COALESCE(SUM(vat),0) FROM charges WHERE 1=1", []
        for col, val in (("workspace", workspace), ("study", study), ("what", what)):
            if val is not None:
                sql += f" AND {col}=?"
                args.append(val)
        r = self._conn.execute(sql, args).fetchone()
        return int(r[0]), int(r[1]), int(r[2])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
