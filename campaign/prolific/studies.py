"""The remote side of a Prolific campaign, made crash-safe: studies per stage, places, decisions on
submissions, bonuses.

Prolific has no request tokens, so every remote call that changes something is preceded by a record of
the intent in a journal (a small SQLite file in the state directory) and followed by a record of the
outcome; a restart finds the intent and reconciles with what the server has instead of repeating the
call blindly:

- a study is found again by its unique `internal_name` (listed) before a second one is created;
- places are set to an absolute number, never added, and only ever raised (Prolific refuses decreases);
- a decision is sent only while the submission is still AWAITING REVIEW (transitions are final, and the
  status tells whether an earlier attempt got through);
- paying a bonus batch is NOT idempotent: the journal marks "paying" before the call, and a restart in
  that state compares the submission's `bonus_payments` with the bonuses the journal knows were paid
  before deciding whether to call again.

This is the part the marketplace adapter needs from Prolific; the HITs themselves live on the built-in
marketplace behind the task site (`campaign.market.prolific_site`).
"""

from __future__ import annotations

import secrets
import sqlite3
import threading
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from campaign.filemodes import private_db, private_dir
from campaign.prolific.verdict import Verdict
from campaign.steps.context import crash_point

SCHEMA = """
CREATE TABLE IF NOT EXISTS studies (key TEXT PRIMARY KEY, internal_name TEXT NOT NULL UNIQUE, completion_code TEXT NOT NULL,
  study_id TEXT, state TEXT NOT NULL, places INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS decisions (submission_id TEXT PRIMARY KEY, action TEXT NOT NULL, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS bonuses (key TEXT PRIMARY KEY, study_id TEXT NOT NULL, submission_id TEXT NOT NULL,
  cents INTEGER NOT NULL, batch_id TEXT, state TEXT NOT NULL, seq INTEGER NOT NULL);
"""
FINAL = ("APPROVED", "REJECTED", "RETURNED", "TIMED-OUT", "SCREENED OUT")


class ProlificStudies:
    def __init__(self, api: Any, state_dir: Path) -> None:
        private_dir(state_dir)
        self.api = api
        self._db = sqlite3.connect(private_db(state_dir / "prolific-journal.sqlite"), check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.executescript(SCHEMA)
        self._lock = threading.RLock()

    def close(self) -> None:
        self._db.close()

    def _row(self, sql: str, *args: Any) -> sqlite3.Row | None:
        return self._db.execute(sql, args).fetchone()

    # -- studies ------------------------------------------------------------------------------------------
    def study(self, key: str) -> sqlite3.Row | None:
        return self._row("SELECT * FROM studies WHERE key=?", key)

    def ensure_study(self, key: str, places: int, body: Callable[[str, str, int], dict[str, Any]]) -> str:
        """The published study of `key` (a stage, or a ranking batch), created on the first call.
        `body(internal_name, completion_code, places)` gives the draft's fields (`study.study_body`)."""
        with self._lock:
            row = self.study(key)
            if row is None:
                tag = secrets.token_hex(6)
                self._db.execute("INSERT INTO studies VALUES (?,?,?,?,?,?)",
                                 (key, f"campaign:{key}:{tag}", "C" + tag.upper(), None, "intent", places))
                row = self.study(key)
            assert row is not None
            if row["state"] == "intent":
                found = [s for s in self.api.studies() if s.get("internal_name") == row["internal_name"]]
                sid = found[0]["id"] if found else self.api.create_study(
                    body(row["internal_name"], row["completion_code"], row["places"]))["id"]
                crash_point("prolific.after_create_study")
                self._db.execute("UPDATE studies SET study_id=?, state='created' WHERE key=?", (sid, key))
                row = self.study(key)
                assert row is not None
            if row["state"] == "created":
                if self.api.study(row["study_id"])["status"] == "UNPUBLISHED":
                    self.api.transition_study(row["study_id"], "PUBLISH")
                    crash_point("prolific.after_publish")
                self._db.execute("UPDATE studies SET state='published' WHERE key=?", (key,))
            return str(row["study_id"])

    def raise_places(self, key: str, places: int) -> int:
        """Places only increase: returns the study's places after the call."""
        with self._lock:
            row = self.study(key)
            if row is None or row["study_id"] is None:
                raise KeyError(key)
            remote = int(self.api.study(row["study_id"])["total_available_places"])
            if places > remote:
                self.api.update_study(row["study_id"], total_available_places=places)
                crash_point("prolific.after_places")
                remote = places
            self._db.execute("UPDATE studies SET places=? WHERE key=?", (remote, key))
            return remote

    def stop(self, key: str) -> None:
        with self._lock:
            row = self.study(key)
            if row is None or row["study_id"] is None or row["state"] == "stopped":
                return
            if self.api.study(row["study_id"])["status"] in ("ACTIVE", "PAUSED"):
                self.api.transition_study(row["study_id"], "STOP")
                crash_point("prolific.after_stop")
            self._db.execute("UPDATE studies SET state='stopped' WHERE key=?", (key,))

    def study_ids(self) -> list[tuple[str, str]]:
        """(key, study id) of every study created so far."""
        return [(r["key"], r["study_id"]) for r in self._db.execute(
            "SELECT key, study_id FROM studies WHERE study_id IS NOT NULL ORDER BY rowid").fetchall()]

    def decided(self) -> set[str]:
        """Submissions whose decision is final on Prolific (nothing more to send)."""
        return {r[0] for r in self._db.execute("SELECT submission_id FROM decisions WHERE state='done'").fetchall()}

    # -- decisions ------------------------------------------------------------------------------------------
    def decide(self, submission_id: str, verdict: Verdict) -> str:
        """Send a bundle's verdict once; returns the submission's status afterwards."""
        if verdict.action not in ("approve", "reject"):
            raise ValueError("only a final verdict is sent")
        with self._lock:
            row = self._row("SELECT * FROM decisions WHERE submission_id=?", submission_id)
            if row is None:
                self._db.execute("INSERT INTO decisions VALUES (?,?,?)", (submission_id, verdict.action, "intent"))
            elif row["state"] == "done":
                return str(self.api.submission(submission_id)["status"])
            status = str(self.api.submission(submission_id)["status"])
            if status == "AWAITING REVIEW":
                crash_point("prolific.before_decision")
                if verdict.action == "approve":
                    status = str(self.api.approve(submission_id)["status"])
                else:
                    status = str(self.api.reject(submission_id, verdict.message or "", verdict.category or "OTHER")["status"])
                crash_point("prolific.after_decision")
            if status in FINAL:
                self._db.execute("UPDATE decisions SET state='done' WHERE submission_id=?", (submission_id,))
            return status

    # -- bonuses --------------------------------------------------------------------------------------------------
    def bonus(self, key: str, study_id: str, submission_id: str, amount: Decimal) -> str:
        """Pay `amount` (major units) to a submission once per `key`; returns the journal state ("paid")."""
        cents = int((Decimal(amount) * 100).to_integral_value())
        if cents <= 0 or Decimal(cents) != Decimal(amount) * 100:
            raise ValueError(f"a bonus is a positive amount in whole cents, not {amount}")
        with self._lock:
            row = self._row("SELECT * FROM bonuses WHERE key=?", key)
            if row is None:
                seq = int(self._db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM bonuses").fetchone()[0])
                self._db.execute("INSERT INTO bonuses VALUES (?,?,?,?,?,?,?)",
                                 (key, study_id, submission_id, cents, None, "intent", seq))
                row = self._row("SELECT * FROM bonuses WHERE key=?", key)
            assert row is not None
            if row["state"] == "intent":
                # Creating a batch pays nothing: a batch an interrupted attempt left behind costs nothing.
                batch = self.api.create_bonus(study_id, [(submission_id, Decimal(cents) / 100)])
                crash_point("prolific.after_create_bonus")
                self._db.execute("UPDATE bonuses SET batch_id=?, state='created' WHERE key=?", (batch["id"], key))
                row = self._row("SELECT * FROM bonuses WHERE key=?", key)
                assert row is not None
            if row["state"] == "paying" and self._was_paid(row):
                self._db.execute("UPDATE bonuses SET state='paid' WHERE key=?", (key,))
                return "paid"
            if row["state"] in ("created", "paying"):
                self._db.execute("UPDATE bonuses SET state='paying' WHERE key=?", (key,))
                crash_point("prolific.before_pay")
                self.api.pay_bonus(row["batch_id"])
                crash_point("prolific.after_pay")
                self._db.execute("UPDATE bonuses SET state='paid' WHERE key=?", (key,))
            return "paid"

    def _was_paid(self, row: sqlite3.Row) -> bool:
        """Did the interrupted pay call get through? The submission holds one entry per bonus paid to it;
        the journal knows which of its earlier bonuses to it were paid."""
        paid_others = int(self._db.execute("SELECT COUNT(*) FROM bonuses WHERE submission_id=? AND state='paid' AND key<>?",
                                           (row["submission_id"], row["key"])).fetchone()[0])
        remote = self.api.submission(row["submission_id"]).get("bonus_payments") or []
        return len(remote) > paid_others
