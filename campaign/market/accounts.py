"""Who may use the marketplace: requester access keys, worker sign-in codes and worker sessions.

Kept in its own SQLite file (`<state>/auth.db`, mode 0600) beside the market's database, so the
market's tables (owned by the engine) never hold a secret and the campaign store never sees one.
Requester secrets are stored as they are (SigV4 verification needs the secret itself); worker
sign-in codes and session tokens are stored only as SHA-256 digests, so a copy of the file does not
let anyone act as a worker.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from campaign.credentials import Credentials
from campaign.filemodes import private_db, private_dir

ACCOUNT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
SECRET_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
DEFAULT_ACCOUNT = "default"
CODE_TTL = 30 * 24 * 3600  # a sign-in link stays valid for 30 days unless re-issued
SESSION_TTL = 12 * 3600

SCHEMA = """
CREATE TABLE IF NOT EXISTS requester_keys (
  key_id TEXT PRIMARY KEY, secret TEXT NOT NULL, account TEXT NOT NULL, created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS keys_account ON requester_keys (account);
CREATE TABLE IF NOT EXISTS worker_codes (
  code_hash TEXT PRIMARY KEY, worker_id TEXT NOT NULL, expires REAL NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
  token_hash TEXT PRIMARY KEY, worker_id TEXT NOT NULL, csrf TEXT NOT NULL, expires REAL NOT NULL);
CREATE INDEX IF NOT EXISTS sessions_worker ON sessions (worker_id);
CREATE INDEX IF NOT EXISTS codes_worker ON worker_codes (worker_id);
"""


@dataclass(frozen=True)
class Session:
    worker_id: str
    csrf: str


class AccountError(ValueError):
    """An operator request that cannot be done (bad name, account exists...)."""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_credentials() -> Credentials:
    key = "AKIA" + "".join(secrets.choice(KEY_ALPHABET) for _ in range(16))
    secret = "".join(secrets.choice(SECRET_ALPHABET) for _ in range(40))
    return Credentials(key, secret)


class Accounts:
    def __init__(self, state_dir: Path) -> None:
        state_dir = private_dir(state_dir)
        self.path = private_db(state_dir / "auth.db")
        self._lock = threading.Lock()
        self._keys: dict[str, tuple[str, str]] = {}
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=10)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _one(self, sql: str, args: tuple) -> tuple | None:
        with self._lock:
            return self._conn.execute(sql, args).fetchone()

    def _run(self, sql: str, args: tuple) -> None:
        with self._lock:
            self._conn.execute(sql, args)

    # -- requesters -----------------------------------------------------------------------------------
    def accounts(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._conn.execute("SELECT DISTINCT account FROM requester_keys ORDER BY account")]

    def credentials_of(self, account: str) -> Credentials | None:
        row = self._one("SELECT key_id, secret FROM requester_keys WHERE account=? ORDER BY created LIMIT 1", (account,))
        return Credentials(row[0], row[1]) if row else None

    def add_account(self, account: str) -> Credentials:
        if not ACCOUNT_RE.match(account):
            raise AccountError(f"account name {account!r} must match {ACCOUNT_RE.pattern}")
        if self.credentials_of(account) is not None:
            raise AccountError(f"account {account!r} exists already")
        creds = new_credentials()
        self._run("INSERT INTO requester_keys (key_id, secret, account, created) VALUES (?,?,?,?)",
                  (creds.access_key_id, creds.secret_access_key, account, time.time()))
        return creds

    def ensure_account(self, account: str = DEFAULT_ACCOUNT) -> Credentials:
        return self.credentials_of(account) or self.add_account(account)

    def lookup_key(self, key_id: str) -> tuple[str, str] | None:
        """(secret, account) of an access key id, or None when the key is unknown. Keys are never changed
        once made, so a found key is remembered; an unknown one is looked up again (another process,
        `campaign market account add`, may have added it)."""
        hit = self._keys.get(key_id)
        if hit is not None:
            return hit
        row = self._one("SELECT secret, account FROM requester_keys WHERE key_id=?", (key_id,))
        if row is None:
            return None
        self._keys[key_id] = (str(row[0]), str(row[1]))
        return self._keys[key_id]

    # -- workers --------------------------------------------------------------------------------------
    def issue_code(self, worker_id: str, ttl: float = CODE_TTL) -> str:
        """A new sign-in code for the worker; earlier codes of that worker stop working and the worker's
        open sessions end (a code is re-issued when the old one may have leaked).

        The code starts with the worker id (`AWORKER-...`): it names whom a wrong guess was aimed at, so
        sign-in attempts can be limited per worker as well as per address (`SignInLimiter`)."""
        code = f"{worker_id}-{secrets.token_urlsafe(24)}"
        with self._lock:
            self._conn.execute("DELETE FROM worker_codes WHERE worker_id=?", (worker_id,))
            self._conn.execute("DELETE FROM sessions WHERE worker_id=?", (worker_id,))
            self._conn.execute("INSERT INTO worker_codes (code_hash, worker_id, expires) VALUES (?,?,?)",
                               (_digest(code), worker_id, time.time() + ttl))
        return code

    def redeem(self, code: str) -> str | None:
        """The worker a sign-in code belongs to, or None (unknown or expired)."""
        if not code or len(code) > 200:
            return None
        row = self._one("SELECT worker_id, expires FROM worker_codes WHERE code_hash=?", (_digest(code),))
        if row is None or row[1] < time.time():
            return None
        return str(row[0])

    def revoke_worker(self, worker_id: str) -> int:
        """Ends every session of the worker and voids their sign-in code; returns how many sessions ended."""
        with self._lock:
            self._conn.execute("DELETE FROM worker_codes WHERE worker_id=?", (worker_id,))
            return int(self._conn.execute("DELETE FROM sessions WHERE worker_id=?", (worker_id,)).rowcount)

    def has_session(self, worker_id: str) -> bool:
        """Whether the worker has a session that has not ended or expired (frame links need one)."""
        return self._one("SELECT 1 FROM sessions WHERE worker_id=? AND expires>=? LIMIT 1", (worker_id, time.time())) is not None

    def open_session(self, worker_id: str, ttl: float = SESSION_TTL) -> tuple[str, Session]:
        """Returns the session token (for the cookie, never stored) and the session."""
        token = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(24)
        now = time.time()
        with self._lock:
            self._conn.execute("DELETE FROM sessions WHERE expires<?", (now,))
            self._conn.execute("INSERT INTO sessions (token_hash, worker_id, csrf, expires) VALUES (?,?,?,?)",
                               (_digest(token), worker_id, csrf, now + ttl))
        return token, Session(worker_id, csrf)

    def session(self, token: str | None) -> Session | None:
        if not token or len(token) > 200:
            return None
        row = self._one("SELECT worker_id, csrf, expires FROM sessions WHERE token_hash=?", (_digest(token),))
        if row is None or row[2] < time.time():
            return None
        return Session(str(row[0]), str(row[1]))

    def close_session(self, token: str) -> None:
        self._run("DELETE FROM sessions WHERE token_hash=?", (_digest(token),))
