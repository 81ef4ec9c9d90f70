"""The marketplace's state: one SQLite file (WAL) under the state directory.

One connection guarded by one lock: every operation runs as a single transaction, so a failing
operation rolls back completely and a restart finds exactly what the last committed request left.
Money is stored as integer cents (SQLite has no decimal type and sums must be exact).

The schema is versioned with SQLite's `user_version`: `SCHEMA` is version 1 (the unversioned layout
of the first release), and each later version is a step in `MIGRATIONS`, applied in its own
transaction. A new file is built the same way as an old one is upgraded, so the upgrade path is the
one every test exercises. A file from a newer release is refused rather than guessed at.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from campaign.filemodes import private_db, private_dir

SCHEMA_VERSION = 3
CHECKPOINT_INTERVAL = 0.5  # seconds between background WAL checkpoints while writes come in
WAL_SIZE_LIMIT = 64 * 1024 * 1024  # bytes
CATCH_UP_FRAMES = 4096  # WAL frames (pages) after which a checkpoint catches up under the write lock

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS accounts (
  requester TEXT PRIMARY KEY, spent_cents INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS hit_types (
  id TEXT PRIMARY KEY, requester TEXT NOT NULL, title TEXT NOT NULL, description TEXT NOT NULL,
  reward_cents INTEGER NOT NULL, duration INTEGER NOT NULL, auto_approval INTEGER NOT NULL,
  keywords TEXT, quals TEXT NOT NULL, masters INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS hits (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, requester TEXT NOT NULL,
  hit_type_id TEXT NOT NULL, creation REAL NOT NULL, expiration REAL NOT NULL,
  max_assignments INTEGER NOT NULL, question TEXT, annotation TEXT,
  reviewing INTEGER NOT NULL DEFAULT 0, disposed INTEGER NOT NULL DEFAULT 0,
  n_accepted INTEGER NOT NULL DEFAULT 0, n_submitted INTEGER NOT NULL DEFAULT 0,
  n_approved INTEGER NOT NULL DEFAULT 0, n_rejected INTEGER NOT NULL DEFAULT 0,
  unit_cost_cents INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS hits_req ON hits (requester, disposed, seq);
CREATE TABLE IF NOT EXISTS assignments (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, hit_id TEXT NOT NULL,
  worker_id TEXT NOT NULL, status TEXT NOT NULL, accept_time REAL NOT NULL, deadline REAL NOT NULL,
  submit_time REAL, auto_approval_time REAL, approval_time REAL, rejection_time REAL,
  answer TEXT, feedback TEXT);
CREATE INDEX IF NOT EXISTS asg_hit ON assignments (hit_id, seq);
CREATE INDEX IF NOT EXISTS asg_worker ON assignments (worker_id, hit_id);
CREATE INDEX IF NOT EXISTS asg_deadline ON assignments (status, deadline);
CREATE INDEX IF NOT EXISTS asg_auto ON assignments (status, auto_approval_time);
CREATE TABLE IF NOT EXISTS tokens (
  requester TEXT NOT NULL, kind TEXT NOT NULL, token TEXT NOT NULL, created REAL NOT NULL, ref TEXT NOT NULL,
  PRIMARY KEY (requester, kind, token));
CREATE TABLE IF NOT EXISTS bonuses (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, requester TEXT NOT NULL, worker_id TEXT NOT NULL,
  assignment_id TEXT NOT NULL, hit_id TEXT NOT NULL, amount_cents INTEGER NOT NULL, reason TEXT NOT NULL,
  grant_time REAL NOT NULL);
CREATE TABLE IF NOT EXISTS blocks (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, requester TEXT NOT NULL, worker_id TEXT NOT NULL, reason TEXT NOT NULL,
  UNIQUE (requester, worker_id));
CREATE TABLE IF NOT EXISTS qual_types (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, requester TEXT NOT NULL, name TEXT NOT NULL,
  description TEXT NOT NULL, keywords TEXT, status TEXT NOT NULL, creation REAL NOT NULL,
  retry_delay INTEGER, auto_granted INTEGER NOT NULL DEFAULT 0, auto_value INTEGER NOT NULL DEFAULT 1,
  UNIQUE (requester, name));
CREATE TABLE IF NOT EXISTS quals (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, qual_type_id TEXT NOT NULL, worker_id TEXT NOT NULL,
  value INTEGER NOT NULL, granted REAL NOT NULL, UNIQUE (qual_type_id, worker_id));
CREATE TABLE IF NOT EXISTS workers (
  id TEXT PRIMARY KEY, country TEXT NOT NULL DEFAULT 'US', subdivision TEXT,
  prior_pct INTEGER NOT NULL DEFAULT 100, prior_approved INTEGER NOT NULL DEFAULT 0,
  masters INTEGER NOT NULL DEFAULT 0, approved_here INTEGER NOT NULL DEFAULT 0,
  rejected_here INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS notifications (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, requester TEXT NOT NULL, worker_id TEXT NOT NULL,
  subject TEXT NOT NULL, message TEXT NOT NULL, sent REAL NOT NULL);
"""

# version -> the statements that take a database from version-1 to it.
MIGRATIONS: dict[int, list[str]] = {
    # Qualification types can be disposed (their name becomes free again), HIT types with them too;
    # which HIT types use which qualification type (ListHITsForQualificationType); workers' requests.
    2: [
        "CREATE TABLE qual_types_v2 ("
        " seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, requester TEXT NOT NULL, name TEXT NOT NULL,"
        " description TEXT NOT NULL, keywords TEXT, status TEXT NOT NULL, creation REAL NOT NULL,"
        " retry_delay INTEGER, auto_granted INTEGER NOT NULL DEFAULT 0, auto_value INTEGER NOT NULL DEFAULT 1,"
        " disposed INTEGER NOT NULL DEFAULT 0)",
        "INSERT INTO qual_types_v2 (seq, id, requester, name, description, keywords, status, creation, retry_delay,"
        " auto_granted, auto_value) SELECT seq, id, requester, name, description, keywords, status, creation, retry_delay,"
        " auto_granted, auto_value FROM qual_types",
        "DROP TABLE qual_types",
        "ALTER TABLE qual_types_v2 RENAME TO qual_types",
        "CREATE UNIQUE INDEX qual_types_name ON qual_types (requester, name) WHERE disposed=0",
        "ALTER TABLE hit_types ADD COLUMN disposed INTEGER NOT NULL DEFAULT 0",
        "CREATE TABLE hit_type_quals (qual_type_id TEXT NOT NULL, hit_type_id TEXT NOT NULL,"
        " PRIMARY KEY (qual_type_id, hit_type_id))",
        "INSERT OR IGNORE INTO hit_type_quals (qual_type_id, hit_type_id)"
        " SELECT json_extract(j.value, '$.QualificationTypeId'), t.id FROM hit_types t, json_each(t.quals) j",
        "CREATE TABLE qual_requests ("
        " seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, qual_type_id TEXT NOT NULL,"
        " worker_id TEXT NOT NULL, status TEXT NOT NULL, submit_time REAL NOT NULL, answered REAL, reason TEXT)",
        "CREATE INDEX qual_requests_type ON qual_requests (qual_type_id, status, seq)",
        "CREATE INDEX qual_requests_worker ON qual_requests (worker_id, qual_type_id, seq)",
    ],
    # Scale (issue 12): what open work could still cost is a per-account counter kept by triggers instead
    # of a sum over every HIT; `live` marks HITs not yet past their expiration as of the last sweep; a
    # partial index holds just the HITs with a free slot, which is what a worker's listing walks.
    3: [
        "ALTER TABLE accounts ADD COLUMN liability_cents INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE hits ADD COLUMN live INTEGER NOT NULL DEFAULT 1",
        "CREATE INDEX hits_live_expiry ON hits (expiration) WHERE live=1",
        "ALTER TABLE hits ADD COLUMN assignable INTEGER GENERATED ALWAYS AS (disposed=0 AND reviewing=0 AND live=1 "
        "AND n_accepted+n_submitted+n_approved+n_rejected<max_assignments) VIRTUAL",
        "CREATE INDEX hits_assignable ON hits (seq) WHERE assignable=1",
        "CREATE INDEX hits_type ON hits (hit_type_id)",
        "CREATE INDEX bonuses_hit ON bonuses (requester, hit_id, seq)",
        "CREATE INDEX bonuses_asg ON bonuses (requester, assignment_id, seq)",
        "CREATE INDEX blocks_worker ON blocks (worker_id)",
        "CREATE INDEX quals_worker ON quals (worker_id)",
        "UPDATE accounts SET liability_cents=(SELECT COALESCE(SUM({}), 0) FROM hits h WHERE h.requester=accounts.requester)"
        .format("CASE WHEN h.disposed THEN 0 WHEN h.live THEN h.unit_cost_cents*(h.max_assignments-h.n_approved-h.n_rejected) "
                "ELSE h.unit_cost_cents*(h.n_accepted+h.n_submitted) END"),
        "CREATE TRIGGER hits_liability_insert AFTER INSERT ON hits BEGIN "
        "UPDATE accounts SET liability_cents=liability_cents+{} WHERE requester=NEW.requester; END".format(
            "CASE WHEN NEW.disposed THEN 0 WHEN NEW.live THEN NEW.unit_cost_cents*(NEW.max_assignments-NEW.n_approved-NEW.n_rejected) "
            "ELSE NEW.unit_cost_cents*(NEW.n_accepted+NEW.n_submitted) END"),
        "CREATE TRIGGER hits_liability_update AFTER UPDATE OF disposed, live, unit_cost_cents, max_assignments, n_accepted, "
        "n_submitted, n_approved, n_rejected ON hits BEGIN "
        "UPDATE accounts SET liability_cents=liability_cents+{}-{} WHERE requester=NEW.requester; END".format(
            "CASE WHEN NEW.disposed THEN 0 WHEN NEW.live THEN NEW.unit_cost_cents*(NEW.max_assignments-NEW.n_approved-NEW.n_rejected) "
            "ELSE NEW.unit_cost_cents*(NEW.n_accepted+NEW.n_submitted) END",
            "CASE WHEN OLD.disposed THEN 0 WHEN OLD.live THEN OLD.unit_cost_cents*(OLD.max_assignments-OLD.n_approved-OLD.n_rejected) "
            "ELSE OLD.unit_cost_cents*(OLD.n_accepted+OLD.n_submitted) END"),
    ],
}


class SchemaError(RuntimeError):
    """The database file was written by a newer release (or is not a marketplace database)."""


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise SchemaError(f"{path} has marketplace schema version {version}, but this version of campaign knows "
                          f"versions up to {SCHEMA_VERSION}; upgrade campaign, or use another --state directory.")
    if version == 0:
        # Version 1 never set user_version: an existing file with tables is version 1, an empty one is new.
        conn.executescript(SCHEMA)
        version = 1
    for target in range(version + 1, SCHEMA_VERSION + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in MIGRATIONS[target]:
                conn.execute(stmt)
            conn.execute(f"PRAGMA user_version={target}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


class Database:
    """One writer connection behind a lock, and a pool of read-only connections.

    WAL lets readers run while a write is in progress and alongside each other, so listing and reading
    requests never wait for the write lock; writes stay serialized (SQLite has one writer anyway).

    Checkpoints (copying the WAL back into the database file, with an fsync) run on a thread of their
    own, not inside a request's COMMIT: SQLite's automatic checkpoint would make every ~100th write
    request pay for a 1,000-page copy while holding the write lock (it was two thirds of a CreateHIT's
    server time), and a checkpoint every half second writes each hot page (index tails, counters) once
    instead of once per thousand pages of WAL. Durability is unchanged: a commit is in the WAL either way.
    """

    def __init__(self, state_dir: Path) -> None:
        state_dir = private_dir(state_dir)
        self.path = private_db(state_dir / "market.db")
        self.lock = threading.RLock()
        self.conn = self._connect()
        self.conn.execute("PRAGMA journal_mode=WAL")
        try:
            _migrate(self.conn, self.path)
        except BaseException:
            self.conn.close()
            raise
        self.conn.execute("PRAGMA wal_autocheckpoint=0")  # the checkpointer thread does it
        self.conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")  # a WAL started over is cut back to this
        self._readers: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        self._closed = False
        self._commits = 0
        self._ckpt_conn: sqlite3.Connection | None = None
        self._stop = threading.Event()
        self._checkpointer = threading.Thread(target=self._checkpoint_loop, name="market-checkpoint", daemon=True)
        self._checkpointer.start()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30.0)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Serialized and atomic: any exception inside rolls everything back."""
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            else:
                self.conn.execute("COMMIT")
                self._commits += 1

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for reading; the connection refuses writes (`query_only`)."""
        with self._pool_lock:
            if self._closed:
                raise sqlite3.ProgrammingError("the marketplace database is closed")
            conn = self._readers.pop() if self._readers else None
        if conn is None:
            conn = self._connect()
            conn.execute("PRAGMA query_only=1")
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")
            with self._pool_lock:
                if self._closed:
                    conn.close()
                else:
                    self._readers.append(conn)

    def _checkpoint_loop(self) -> None:
        done = 0
        try:
            while not self._stop.wait(CHECKPOINT_INTERVAL):
                if self._commits != done:
                    done = self._commits
                    self.checkpoint()
        finally:
            if self._ckpt_conn is not None:
                self._ckpt_conn.close()
                self._ckpt_conn = None

    def checkpoint(self) -> bool:
        """Copy the WAL into the database file; True when all of it was (the next write then starts the WAL
        over from its beginning instead of growing it: a WAL that only grows makes every read slower).

        The bulk runs beside the writer (PASSIVE never blocks anyone). Under a steady stream of writes
        such a checkpoint never quite catches up, so once the WAL holds `CATCH_UP_FRAMES` frames what was
        committed meanwhile is copied in a second, short pass under the write lock (short, but with the
        checkpoint's fsync: not on every round, so that writes rarely wait for a disk flush)."""
        if self._ckpt_conn is None:
            self._ckpt_conn = self._connect()
        conn = self._ckpt_conn
        try:
            busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if not busy and frames >= CATCH_UP_FRAMES:  # complete now or not, a write may be under way: catch up
                with self.lock:
                    busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error:
            return False  # busy or closing: the next round (or the last connection's close) does it
        return not busy and frames == copied

    def close(self) -> None:
        self._stop.set()
        if self._checkpointer.is_alive() and self._checkpointer is not threading.current_thread():
            self._checkpointer.join(timeout=10)
        if self._ckpt_conn is not None and not self._checkpointer.is_alive():  # used by a direct checkpoint() call
            self._ckpt_conn.close()
            self._ckpt_conn = None
        with self._pool_lock:
            self._closed = True
            idle, self._readers = self._readers, []
        for conn in idle:  # a connection in use now is closed when its request gives it back
            conn.close()
        with self.lock:
            self.conn.close()
