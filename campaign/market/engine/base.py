"""The engine's shared core: entry points, the swept life cycle, money, tokens, pagination, HIT rows.

Time comes only from the injected `Clock`, and due transitions (abandonment, auto-approval) are swept
at the start of every request rather than by a timer thread: an accelerated or manual clock then
behaves exactly like the wall clock, and nothing happens while nobody is looking that a later request
could not reconstruct. Each request is one transaction: an operation that raises changes nothing.
HIT status is derived from counters and the expiration time, never stored, so it cannot go stale.
The role modules (hits, assignments, qualifications, workers) extend `EngineBase`; `Engine` joins them.
"""

from __future__ import annotations

import base64
import json
import secrets
import sqlite3
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from campaign.clock import Clock, WallClock
from campaign.ids import random_bytes
from campaign.market.db import Database
from campaign.market.protocol import ApiError, TurkError, request_error, validation_error
from campaign.money import CENT, MoneyError, fmt, parse_amount

Conn = sqlite3.Connection
Params = dict[str, Any]
Result = dict[str, Any]

ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
TOKEN_TTL = 24 * 3600
OVERRIDE_WINDOW = 30 * 24 * 3600
DISPOSE_AFTER = 120 * 24 * 3600
DEFAULT_PAGE = 10
SANDBOX_BALANCE = Decimal("10000.00")
VISIBLE = ("Submitted", "Approved", "Rejected")


class WorkerError(Exception):
    """A refusal on the worker side (JSON `{"error": code, "message": ...}`)."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def new_id(n: int = 30, scope: str = "") -> str:
    """n characters of [A-Z0-9] from one read of the OS's random source (36**30 < 2**156 < 8 * (n + 2) bits);
    `scope`: what the id belongs to, for a simulation's seeded ids (`campaign.ids.random_bytes`)."""
    value = int.from_bytes(random_bytes(n + 2, scope), "big")
    out = []
    for _ in range(n):
        value, digit = divmod(value, 36)
        out.append(ID_ALPHABET[digit])
    return "".join(out)


def cents(amount: Decimal) -> int:
    return int((Decimal(amount) / CENT).to_integral_value())


def dollars(c: int) -> Decimal:
    return (Decimal(c) * CENT).quantize(CENT)


def invalid(message: str) -> TurkError:
    return TurkError("InvalidParameterValue", message)


MAX_MONEY = Decimal("1000000.00")  # per Reward or bonus: far above any real HIT, far below SQLite's integer range
MAX_SQL_INT = 2**63 - 1


def money(member: str, text: str) -> Decimal:
    """A CurrencyAmount parameter, bounded so that cents times assignments can never overflow storage."""
    try:
        amount = parse_amount(text)
    except MoneyError as exc:
        raise validation_error([f"Value '{text}' at '{member[:1].lower() + member[1:]}' failed to satisfy constraint: {exc}"]) from None
    if amount > MAX_MONEY:
        raise validation_error([f"Value '{text}' at '{member[:1].lower() + member[1:]}' failed to satisfy constraint: "
                                f"Member must have value less than or equal to {MAX_MONEY}"])
    return amount


def out_of_storage_range(value: Any, path: str = "") -> str | None:
    """The first integer anywhere in a request that no column could hold (JSON allows any size), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if -MAX_SQL_INT <= value <= MAX_SQL_INT else (
            f"Value '{value}' at '{path}' failed to satisfy constraint: Member must have value less than or equal to {MAX_SQL_INT}")
    if isinstance(value, dict):
        for k, v in value.items():
            found = out_of_storage_range(v, f"{path}.{k[:1].lower() + k[1:]}" if path else k[:1].lower() + k[1:])
            if found:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = out_of_storage_range(v, f"{path}.{i + 1}.member")
            if found:
                return found
    return None


def unknown_worker(wid: str) -> ApiError:
    """MTurk's answer when a worker id names nobody (observed: aws-sdk-java#2055, boto3#2355)."""
    return ApiError(400, {"__type": "ParameterValidationError",
                          "Message": f'The value "{wid}" is not valid for the parameter WorkerId. ({int(time.time() * 1000)} s)'})


def check_ranges(*found: str | None) -> None:
    """One ValidationException naming every limit broken, as AWS reports them together."""
    problems = [x for x in found if x]
    if problems:
        raise validation_error(problems)


class EngineBase:
    def __init__(self, db: Database, clock: Clock | None = None, mode: str = "sandbox",
                 balance: Decimal = SANDBOX_BALANCE) -> None:
        if mode not in ("sandbox", "prod"):
            raise ValueError(f"mode must be 'sandbox' or 'prod', got {mode!r}")
        self.db = db
        self.clock = clock or WallClock()
        self.mode = mode
        self.balance = Decimal(balance)
        self.visibility_lag = 0.0  # seconds of clock time a new submission stays invisible to the requester
        # Clock time of the earliest due transition (abandonment, auto-approval, expiry), recomputed after
        # every write; until then no request needs to sweep, and reads need no write lock at all. It is
        # exact because this engine is the only writer of its database.
        self._next_due = float("-inf")
        self._accounts: set[str] = set()  # requesters whose account row is known to be committed

    # -- entry points ---------------------------------------------------------------------------------
    def handle(self, requester: str, op: str, params: dict[str, Any]) -> dict[str, Any]:
        fn: Callable | None = getattr(self, f"op_{op}", None)
        if fn is None:
            raise request_error("InvalidParameterValue", f"The operation {op} is not supported by this marketplace.")
        too_big = out_of_storage_range(params)
        if too_big:
            raise validation_error([too_big])
        now = self.clock.now()
        try:
            if op.startswith(("Get", "List")) and now < self._next_due:
                with self.db.read() as c:
                    return fn(c, requester, params, now)
            with self.db.transaction() as c:
                self._sweep(c, now)
                if requester not in self._accounts:
                    self._ensure_account(c, requester)
                result = fn(c, requester, params, now)
                next_due = self._due_after(c)
            self._next_due = next_due  # only once committed: a rolled-back request changes nothing here either
            self._accounts.add(requester)
            return result
        except TurkError as exc:
            raise request_error(exc.code, exc.message) from None

    WORKER_READS = frozenset({"available", "preview", "task", "qualification_requests", "known"})

    def worker(self, fn_name: str, *args: Any) -> Any:
        fn = getattr(self, f"w_{fn_name}")
        now = self.clock.now()
        if fn_name in self.WORKER_READS and now < self._next_due:
            with self.db.read() as c:
                return fn(c, now, *args)
        with self.db.transaction() as c:
            self._sweep(c, now)
            result = fn(c, now, *args)
            next_due = self._due_after(c)
        self._next_due = next_due
        return result

    # -- life cycle -----------------------------------------------------------------------------------
    @staticmethod
    def _due_after(c: sqlite3.Connection) -> float:
        """When the next sweep has something to do (three index probes)."""
        row = c.execute(
            "SELECT MIN(t) FROM (SELECT MIN(deadline) AS t FROM assignments WHERE status='Accepted' "
            "UNION ALL SELECT MIN(auto_approval_time) FROM assignments WHERE status='Submitted' "
            "UNION ALL SELECT MIN(expiration) FROM hits WHERE live=1)").fetchone()
        return float("inf") if row[0] is None else float(row[0])

    def _sweep(self, c: sqlite3.Connection, now: float) -> None:
        if now < self._next_due:
            return
        for row in c.execute("SELECT id, hit_id FROM assignments WHERE status='Accepted' AND deadline<=?", (now,)).fetchall():
            self._move(c, row["id"], row["hit_id"], "Accepted", "Abandoned")
        due = c.execute("SELECT a.id, a.hit_id, a.worker_id, a.auto_approval_time, h.requester, h.unit_cost_cents "
                        "FROM assignments a JOIN hits h ON h.id=a.hit_id "
                        "WHERE a.status='Submitted' AND a.auto_approval_time<=?", (now,)).fetchall()
        for row in due:
            # Auto-approval is charged like a manual one; it happens whatever the balance (MTurk pays workers).
            self._move(c, row["id"], row["hit_id"], "Submitted", "Approved", approval_time=row["auto_approval_time"])
            self._charge(c, row["requester"], row["unit_cost_cents"])
            c.execute("UPDATE workers SET approved_here=approved_here+1 WHERE id=?", (row["worker_id"],))
        # Expired HITs now owe only their pending work (the liability trigger does the arithmetic).
        c.execute("UPDATE hits SET live=0 WHERE live=1 AND expiration<=?", (now,))

    _COUNTER = {"Accepted": "n_accepted", "Submitted": "n_submitted", "Approved": "n_approved", "Rejected": "n_rejected"}

    def _move(self, c: sqlite3.Connection, aid: str, hit_id: str, old: str, new: str, **fields: Any) -> None:
        sets = ", ".join(["status=?"] + [f"{k}=?" for k in fields])
        c.execute(f"UPDATE assignments SET {sets} WHERE id=?", (new, *fields.values(), aid))
        parts = []
        if old in self._COUNTER:
            parts.append(f"{self._COUNTER[old]}={self._COUNTER[old]}-1")
        if new in self._COUNTER:
            parts.append(f"{self._COUNTER[new]}={self._COUNTER[new]}+1")
        if parts:
            c.execute(f"UPDATE hits SET {', '.join(parts)} WHERE id=?", (hit_id,))

    def _ensure_account(self, c: sqlite3.Connection, requester: str) -> None:
        c.execute("INSERT OR IGNORE INTO accounts (requester) VALUES (?)", (requester,))

    def _charge(self, c: sqlite3.Connection, requester: str, amount_cents: int) -> None:
        c.execute("UPDATE accounts SET spent_cents=spent_cents+? WHERE requester=?", (amount_cents, requester))

    def _available_cents(self, c: sqlite3.Connection, requester: str) -> int:
        spent = c.execute("SELECT spent_cents FROM accounts WHERE requester=?", (requester,)).fetchone()
        return cents(self.balance) - (spent[0] if spent else 0)

    def _liability_cents(self, c: sqlite3.Connection, requester: str, now: float) -> int:
        """What open work could still cost: unresolved slots of live HITs, pending work of expired ones.

        A counter kept by triggers on `hits` (schema version 3), exact as of the sweep at `now`.
        """
        row = c.execute("SELECT liability_cents FROM accounts WHERE requester=?", (requester,)).fetchone()
        return int(row[0]) if row else 0

    def _require_funds(self, c: sqlite3.Connection, requester: str, need_cents: int, now: float, liability: bool) -> None:
        if self.mode != "prod":
            return
        available = self._available_cents(c, requester)
        if liability:
            available -= self._liability_cents(c, requester, now)
        if need_cents > available:
            raise TurkError("InsufficientFunds", "This Requester has insufficient funds in their account to complete this transaction. "
                            "Please visit https://requester.mturk.com/account to purchase more.")

    # -- tokens ---------------------------------------------------------------------------------------
    def _token_seen(self, c: sqlite3.Connection, requester: str, kind: str, token: str | None, now: float) -> str | None:
        if not token:
            return None
        row = c.execute("SELECT created, ref FROM tokens WHERE requester=? AND kind=? AND token=?", (requester, kind, token)).fetchone()
        if row is None:
            return None
        if row["created"] > now - TOKEN_TTL:
            return row["ref"]
        c.execute("DELETE FROM tokens WHERE requester=? AND kind=? AND token=?", (requester, kind, token))
        return None

    def _remember(self, c: sqlite3.Connection, requester: str, kind: str, token: str | None, ref: str, now: float) -> None:
        if token:
            c.execute("INSERT OR REPLACE INTO tokens (requester, kind, token, created, ref) VALUES (?,?,?,?,?)",
                      (requester, kind, token, now, ref))

    # -- pagination -----------------------------------------------------------------------------------
    @staticmethod
    def _page_args(params: dict[str, Any], kind: str) -> tuple[int, int]:
        limit = int(params.get("MaxResults") or DEFAULT_PAGE)
        token = params.get("NextToken")
        if not token:
            return limit, 0
        try:
            pad = "=" * (-len(token) % 4)
            data = json.loads(base64.urlsafe_b64decode(token + pad).decode())
            if data["k"] != kind:
                raise ValueError
            after = int(data["s"])
            if not -MAX_SQL_INT <= after <= MAX_SQL_INT:
                raise ValueError
            return limit, after
        except Exception:
            raise invalid(f"The pagination token '{token}' is not valid for this operation.") from None

    @staticmethod
    def _page(rows: list, limit: int, kind: str, seq_of: Callable[[Any], int]) -> tuple[list, str | None]:
        """Like MTurk: a token on every page that has results (the last one too), none on an empty page.

        Client loops in the field read `resp["NextToken"]` while the page is non-empty, so the last page
        must carry one; the page it leads to is empty and ends every loop (botocore's paginator too).
        Every page but the last holds `limit` rows: the daemon's own client stops at a short page
        (`campaign.marketplaces.signed_json`), so a listing must never filter rows after this cut.
        """
        rows = rows[:limit]
        if not rows:
            return rows, None
        raw = json.dumps({"k": kind, "s": seq_of(rows[-1]), "n": secrets.token_hex(4)}).encode()
        return rows, base64.urlsafe_b64encode(raw).decode().rstrip("=")


    def _hit_row(self, c: Conn, hit_id: str, requester: str | None = None) -> sqlite3.Row:
        row = c.execute("SELECT h.*, t.title, t.description, t.reward_cents, t.duration, t.auto_approval, t.keywords, "
                        "t.quals FROM hits h JOIN hit_types t ON t.id=h.hit_type_id WHERE h.id=?", (hit_id,)).fetchone()
        if row is None or (requester is not None and row["requester"] != requester):
            raise TurkError("HITDoesNotExist", f"Hit {hit_id} does not exist.")
        return row

    @staticmethod
    def hit_status(h: sqlite3.Row, now: float) -> str:
        if h["disposed"]:
            return "Disposed"
        if h["reviewing"]:
            return "Reviewing"
        used = h["n_accepted"] + h["n_submitted"] + h["n_approved"] + h["n_rejected"]
        if now < h["expiration"] and used < h["max_assignments"]:
            return "Assignable"
        if h["n_accepted"] > 0:
            return "Unassignable"
        return "Reviewable"

    def _hit_out(self, h: sqlite3.Row, now: float) -> dict[str, Any]:
        status = self.hit_status(h, now)
        used = h["n_accepted"] + h["n_submitted"] + h["n_approved"] + h["n_rejected"]
        out = {
            "HITId": h["id"], "HITTypeId": h["hit_type_id"], "HITGroupId": h["hit_type_id"],
            "CreationTime": h["creation"], "Title": h["title"], "Description": h["description"],
            "Question": h["question"], "Keywords": h["keywords"], "HITStatus": status,
            "MaxAssignments": h["max_assignments"], "Reward": fmt(dollars(h["reward_cents"])),
            "AutoApprovalDelayInSeconds": h["auto_approval"], "Expiration": h["expiration"],
            "AssignmentDurationInSeconds": h["duration"], "RequesterAnnotation": h["annotation"],
            "QualificationRequirements": json.loads(h["quals"]), "HITReviewStatus": "NotReviewed",
            "NumberOfAssignmentsPending": h["n_accepted"],
            "NumberOfAssignmentsAvailable": max(0, h["max_assignments"] - used) if now < h["expiration"] else 0,
            "NumberOfAssignmentsCompleted": h["n_approved"] + h["n_rejected"],
        }
        return {k: v for k, v in out.items() if v is not None}

    _HIT_SELECT = ("SELECT h.*, t.title, t.description, t.reward_cents, t.duration, t.auto_approval, t.keywords, t.quals "
                   "FROM hits h JOIN hit_types t ON t.id=h.hit_type_id ")


    @staticmethod
    def _listing(key: str, items: list, token: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {"NumResults": len(items), key: items}
        if token:
            out["NextToken"] = token
        return out

