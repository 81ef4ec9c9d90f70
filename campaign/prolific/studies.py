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
- paying a bonus batch is NOT idempotent and is asynchronous (Prolific pays "in the following minutes"):
  the journal marks "paying" before the call, and a bonus found in that state (a crash, or an answer
  lost, between the call and its record) is never paid again automatically. It is reconciled instead:
  once the submission's `bonus_payments` show it (more payments of its amount than the journal's other
  paid bonuses of that amount to the submission) it is "paid"; until then `BonusPending` (try again
  later); after `reconcile_seconds` without it, "uncertain" (`BonusUncertain`), for the researcher to
  check on Prolific, never decided by the program.

This is the part the marketplace adapter needs from Prolific; the HITs themselves live on the built-in
marketplace behind the task site (`campaign.market.prolific_site`).
"""

from __future__ import annotations

import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from campaign.crash import crash_point
from campaign.filemodes import private_db, private_dir
from campaign.prolific.verdict import Verdict
from campaign.state import BonusState

SCHEMA = """
CREATE TABLE IF NOT EXISTS studies (key TEXT PRIMARY KEY, internal_name TEXT NOT NULL UNIQUE, completion_code TEXT NOT NULL,
  study_id TEXT, state TEXT NOT NULL, places INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS decisions (submission_id TEXT PRIMARY KEY, action TEXT NOT NULL, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS bonuses (key TEXT PRIMARY KEY, study_id TEXT NOT NULL, submission_id TEXT NOT NULL,
  cents INTEGER NOT NULL, batch_id TEXT, state TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS bonus_checks (key TEXT PRIMARY KEY, since REAL NOT NULL);
"""
FINAL = ("APPROVED", "REJECTED", "RETURNED", "TIMED-OUT", "SCREENED OUT")
RECONCILE_SECONDS = 900.0  # how long a pay call's payment may take to show ("in the following minutes")
UNCERTAIN = "uncertain"  # a bonus state: maybe paid, not visible on Prolific in time; the researcher decides


class BonusPending(Exception):
    """A pay call may have gone through and its payment does not show yet: ask again later (it is never
    paid twice)."""


class BonusUncertain(Exception):
    """A pay call may have gone through and its payment did not show within the reconciliation time: the
    program will not pay it again; the researcher checks on Prolific."""


class ProlificStudies:
    def __init__(self, api: Any, state_dir: Path, *, reconcile_seconds: float = RECONCILE_SECONDS,
                 now: Callable[[], float] = time.time) -> None:
        """`now` is wall time: Prolific processes a payment in real minutes, whatever a run's clock says."""
        private_dir(state_dir)
        self.api = api
        self.reconcile_seconds = reconcile_seconds
        self._now = now
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
            if places > remote and row["state"] not in ("stopping", "stopped"):  # more places would reopen it
                self.api.update_study(row["study_id"], total_available_places=places)
                crash_point("prolific.after_places")
                remote = places
            self._db.execute("UPDATE studies SET places=? WHERE key=?", (remote, key))
            return remote

    def stop(self, key: str) -> None:
        """Take no more participants. Prolific stops only an ACTIVE or PAUSED study; one AWAITING REVIEW
        (every place finished), or COMPLETED by itself, becomes ACTIVE again when a place frees (a return,
        a time-out, a rejection), so it stays `stopping` and is stopped on a later call, once it is
        ACTIVE. `stopping` is recorded first: from then on no places are added (`raise_places`)."""
        with self._lock:
            row = self.study(key)
            if row is None or row["study_id"] is None or row["state"] == "stopped":
                return
            if row["state"] != "stopping":
                self._db.execute("UPDATE studies SET state='stopping' WHERE key=?", (key,))
            if self.api.study(row["study_id"])["status"] in ("ACTIVE", "PAUSED"):
                self.api.transition_study(row["study_id"], "STOP")
                crash_point("prolific.after_stop")
                self._db.execute("UPDATE studies SET state='stopped' WHERE key=?", (key,))

    def stopping(self, key: str) -> bool:
        """The study is being or has been stopped: it gets no more places."""
        row = self.study(key)
        return row is not None and row["state"] in ("stopping", "stopped")

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
        """Pay `amount` (major units) to a submission once per `key`; returns "paid", or raises
        `BonusPending` / `BonusUncertain` for a bonus whose pay call may have gone through unrecorded."""
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
            if row["state"] in ("paying", UNCERTAIN):
                return self._reconcile(row)
            if row["state"] == "created":
                crash_point("prolific.before_pay")  # nothing sent, nothing recorded: a restart pays it
                self._db.execute("UPDATE bonuses SET state='paying' WHERE key=?", (key,))
                # From here a crash cannot be told from a call whose answer was lost: the bonus is reconciled,
                # then uncertain for the researcher (never paid twice). An uncertain work bonus keeps its
                # study open until the researcher acts, and there is no command for that yet.
                crash_point("prolific.pay_unrecorded")
                try:
                    self.api.pay_bonus(row["batch_id"])
                except Exception as exc:
                    if 400 <= int(getattr(exc, "status", 0)) < 500:  # refused: nothing was paid, it may be tried again
                        self._db.execute("UPDATE bonuses SET state='created' WHERE key=?", (key,))
                    raise  # otherwise (no answer, 5xx) it may have been paid: reconciled from now on
                crash_point("prolific.after_pay")
                self._db.execute("UPDATE bonuses SET state='paid' WHERE key=?", (key,))
            return BonusState.PAID

    def bonus_paid(self, key: str) -> bool:
        """The bonus of `key` was paid (its pay call recorded, or reconciled from Prolific)."""
        row = self._row("SELECT state FROM bonuses WHERE key=?", key)
        return row is not None and row["state"] == BonusState.PAID

    def uncertain_bonuses(self) -> list[tuple[str, str, int]]:
        """(key, submission id, cents) of every bonus that may have been paid but never showed."""
        return [(r[0], r[1], int(r[2])) for r in self._db.execute(
            "SELECT key, submission_id, cents FROM bonuses WHERE state=? ORDER BY seq", (UNCERTAIN,)).fetchall()]

    def _reconcile(self, row: sqlite3.Row) -> str:
        """A bonus whose pay call may have gone through: paid once Prolific shows it, never called again."""
        key = row["key"]
        if self._shows_paid(row):
            self._db.execute("UPDATE bonuses SET state='paid' WHERE key=?", (key,))
            self._db.execute("DELETE FROM bonus_checks WHERE key=?", (key,))
            return BonusState.PAID
        now = self._now()
        self._db.execute("INSERT OR IGNORE INTO bonus_checks VALUES (?,?)", (key, now))
        since = float(self._db.execute("SELECT since FROM bonus_checks WHERE key=?", (key,)).fetchone()[0])
        amount = f"{Decimal(row['cents']) / 100:.2f}"
        if row["state"] == UNCERTAIN or now - since >= self.reconcile_seconds:
            self._db.execute("UPDATE bonuses SET state=? WHERE key=?", (UNCERTAIN, key))
            raise BonusUncertain(f"bonus of {amount} to submission {row['submission_id']} (batch {row['batch_id']}): the pay "
                                 f"call may have gone through, and no payment showed on Prolific within "
                                 f"{self.reconcile_seconds / 60:.0f} minutes; it is not paid again automatically: check the "
                                 "study's bonus payments on Prolific")
        raise BonusPending(f"bonus of {amount} to submission {row['submission_id']}: a pay call may have gone through; "
                           f"waiting for Prolific to show it (checked for {now - since:.0f} s), never paid twice")

    def _shows_paid(self, row: sqlite3.Row) -> bool:
        """The submission lists one entry per bonus payment that reached it: more entries of this amount
        than the journal's other paid bonuses of the same amount to it means this one got through."""
        paid_others = int(self._db.execute(
            "SELECT COUNT(*) FROM bonuses WHERE submission_id=? AND cents=? AND state='paid' AND key<>?",
            (row["submission_id"], row["cents"], row["key"])).fetchone()[0])
        remote = self.api.submission(row["submission_id"]).get("bonus_payments") or []
        return sum(1 for x in remote if int(x) == int(row["cents"])) > paid_others
