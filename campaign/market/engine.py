"""The marketplace's operations and life cycle, on top of `db.Database`.

Time comes only from the injected `Clock`, and due transitions (abandonment, auto-approval) are swept
at the start of every request rather than by a timer thread: an accelerated or manual clock then
behaves exactly like the wall clock, and nothing happens while nobody is looking that a later request
could not reconstruct. Each request is one transaction: an operation that raises changes nothing.
HIT status is derived from counters and the expiration time, never stored, so it cannot go stale.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import sqlite3
import xml.etree.ElementTree as ET
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from campaign.clock import Clock, WallClock
from campaign.market import quals as Q
from campaign.market.answers import build_answer_xml
from campaign.market.db import Database
from campaign.market.protocol import TurkError, range_problem, request_error, validation_error
from campaign.money import CENT, assignment_cost, bonus_fee, fmt, parse_amount

ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
TOKEN_TTL = 24 * 3600
OVERRIDE_WINDOW = 30 * 24 * 3600
DISPOSE_AFTER = 120 * 24 * 3600
DEFAULT_PAGE = 10
SANDBOX_BALANCE = Decimal("10000.00")
QUESTION_ROOTS = {"HTMLQuestion", "ExternalQuestion", "QuestionForm"}
VISIBLE = ("Submitted", "Approved", "Rejected")


class WorkerError(Exception):
    """A refusal on the worker side (JSON `{"error": code, "message": ...}`)."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def new_id(n: int = 30) -> str:
    return "".join(secrets.choice(ID_ALPHABET) for _ in range(n))


def cents(amount: Decimal) -> int:
    return int((Decimal(amount) / CENT).to_integral_value())


def dollars(c: int) -> Decimal:
    return (Decimal(c) * CENT).quantize(CENT)


def _invalid(message: str) -> TurkError:
    return TurkError("InvalidParameterValue", message)


class Engine:
    def __init__(self, db: Database, clock: Clock | None = None, mode: str = "sandbox",
                 balance: Decimal = SANDBOX_BALANCE) -> None:
        if mode not in ("sandbox", "prod"):
            raise ValueError(f"mode must be 'sandbox' or 'prod', got {mode!r}")
        self.db = db
        self.clock = clock or WallClock()
        self.mode = mode
        self.balance = Decimal(balance)
        self.visibility_lag = 0.0  # seconds of clock time a new submission stays invisible to the requester

    # -- entry points ---------------------------------------------------------------------------------
    def handle(self, requester: str, op: str, params: dict[str, Any]) -> dict[str, Any]:
        fn: Callable | None = getattr(self, f"op_{op}", None)
        if fn is None:
            raise request_error("InvalidParameterValue", f"The operation {op} is not supported by this marketplace.")
        now = self.clock.now()
        try:
            with self.db.transaction() as c:
                self._sweep(c, now)
                self._ensure_account(c, requester)
                return fn(c, requester, params, now)
        except TurkError as exc:
            raise request_error(exc.code, exc.message) from None

    def worker(self, fn_name: str, *args: Any) -> Any:
        now = self.clock.now()
        with self.db.transaction() as c:
            self._sweep(c, now)
            return getattr(self, f"w_{fn_name}")(c, now, *args)

    # -- life cycle -----------------------------------------------------------------------------------
    def _sweep(self, c: sqlite3.Connection, now: float) -> None:
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
        """What open work could still cost: unresolved slots of live HITs, pending work of expired ones."""
        row = c.execute(
            "SELECT COALESCE(SUM(unit_cost_cents * CASE WHEN expiration > ? "
            "THEN max_assignments - n_approved - n_rejected ELSE n_accepted + n_submitted END), 0) "
            "FROM hits WHERE requester=? AND disposed=0", (now, requester)).fetchone()
        return int(row[0])

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
            return limit, int(data["s"])
        except Exception:
            raise _invalid(f"The pagination token '{token}' is not valid for this operation.") from None

    @staticmethod
    def _page(rows: list, limit: int, kind: str, seq_of: Callable[[Any], int]) -> tuple[list, str | None]:
        if len(rows) <= limit:
            return rows, None
        rows = rows[:limit]
        raw = json.dumps({"k": kind, "s": seq_of(rows[-1]), "n": secrets.token_hex(4)}).encode()
        return rows, base64.urlsafe_b64encode(raw).decode().rstrip("=")

    # -- HIT types and HITs ---------------------------------------------------------------------------
    def _check_type_params(self, c: sqlite3.Connection, requester: str, p: dict[str, Any]) -> list[dict]:
        problems = [x for x in (
            range_problem("Title", p["Title"], 1, 128, length=True),
            range_problem("Description", p["Description"], 1, 2000, length=True),
            range_problem("Keywords", p.get("Keywords", ""), None, 1000, length=True),
            range_problem("AssignmentDurationInSeconds", p["AssignmentDurationInSeconds"], 30, 31_536_000),
            range_problem("AutoApprovalDelayInSeconds", p.get("AutoApprovalDelayInSeconds", 2_592_000), 0, 2_592_000),
        ) if x]
        reqs = p.get("QualificationRequirements") or []
        if len(reqs) > 10:
            problems.append(range_problem("QualificationRequirements", reqs, None, 10, length=True))
        if problems:
            raise validation_error(problems)
        for r in reqs:
            why = Q.requirement_problem(r)
            if why:
                raise _invalid(why)
            qid = r["QualificationTypeId"]
            if qid not in Q.SYSTEM_IDS and c.execute("SELECT 1 FROM qual_types WHERE id=?", (qid,)).fetchone() is None:
                raise TurkError("QualificationTypeDoesNotExist", f"You requested a Qualification that does not exist. ({qid})")
        return reqs

    def _hit_type(self, c: sqlite3.Connection, requester: str, p: dict[str, Any]) -> str:
        reqs = self._check_type_params(c, requester, p)
        reward = parse_amount(p["Reward"])
        auto = int(p.get("AutoApprovalDelayInSeconds", 2_592_000))
        canon = json.dumps([requester, p["Title"], p["Description"], fmt(reward), p["AssignmentDurationInSeconds"],
                            auto, p.get("Keywords", ""), reqs], sort_keys=True)
        digest = hashlib.sha256(canon.encode()).digest()
        type_id = base64.b32encode(digest).decode()[:30]
        c.execute("INSERT OR IGNORE INTO hit_types (id, requester, title, description, reward_cents, duration, "
                  "auto_approval, keywords, quals, masters) VALUES (?,?,?,?,?,?,?,?,?,?)",
                  (type_id, requester, p["Title"], p["Description"], cents(reward), p["AssignmentDurationInSeconds"],
                   auto, p.get("Keywords"), json.dumps(reqs), int(Q.is_masters(reqs))))
        return type_id

    def op_CreateHITType(self, c, req, p, now):
        return {"HITTypeId": self._hit_type(c, req, p)}

    def op_CreateHIT(self, c, req, p, now):
        type_params = {k: p[k] for k in ("Title", "Description", "Reward", "AssignmentDurationInSeconds",
                                         "AutoApprovalDelayInSeconds", "Keywords", "QualificationRequirements") if k in p}
        existing = self._token_seen(c, req, "hit", p.get("UniqueRequestToken"), now)
        if existing:
            raise self._hit_exists(existing, p["UniqueRequestToken"])
        type_id = self._hit_type(c, req, type_params)
        return self._create_hit(c, req, type_id, p, now)

    def op_CreateHITWithHITType(self, c, req, p, now):
        existing = self._token_seen(c, req, "hit", p.get("UniqueRequestToken"), now)
        if existing:
            raise self._hit_exists(existing, p["UniqueRequestToken"])
        if c.execute("SELECT 1 FROM hit_types WHERE id=? AND requester=?", (p["HITTypeId"], req)).fetchone() is None:
            raise _invalid(f"Hit type {p['HITTypeId']} does not exist.")
        return self._create_hit(c, req, p["HITTypeId"], p, now)

    @staticmethod
    def _hit_exists(hit_id: str, token: str) -> TurkError:
        return TurkError("HitAlreadyExists", f"The HIT with ID \"{hit_id}\" already exists. "
                         f"The request with unique request token \"{token}\" has already been processed.")

    def _create_hit(self, c, req, type_id: str, p: dict[str, Any], now: float) -> dict:
        problems = [x for x in (
            range_problem("LifetimeInSeconds", p["LifetimeInSeconds"], 30, 31_536_000),
            range_problem("MaxAssignments", p.get("MaxAssignments", 1), 1, 1_000_000_000),
            range_problem("RequesterAnnotation", p.get("RequesterAnnotation", ""), None, 255, length=True),
            range_problem("UniqueRequestToken", p.get("UniqueRequestToken", "x"), 1, 64, length=True),
        ) if x]
        if problems:
            raise validation_error(problems)
        if p.get("HITLayoutId") or p.get("HITLayoutParameters"):
            raise _invalid("HIT layouts are not supported by this marketplace; send a Question.")
        if p.get("AssignmentReviewPolicy") or p.get("HITReviewPolicy"):
            raise _invalid("Review policies are not supported by this marketplace.")
        question = p.get("Question")
        if not question:
            raise _invalid("Either the Question parameter or the HITLayoutId parameter must be provided.")
        check_question(question)
        t = c.execute("SELECT * FROM hit_types WHERE id=?", (type_id,)).fetchone()
        max_a = int(p.get("MaxAssignments", 1))
        unit = cents(assignment_cost(dollars(t["reward_cents"]), max_a, bool(t["masters"])))
        self._require_funds(c, req, unit * max_a, now, liability=True)
        hit_id = new_id()
        c.execute("INSERT INTO hits (id, requester, hit_type_id, creation, expiration, max_assignments, question, "
                  "annotation, unit_cost_cents) VALUES (?,?,?,?,?,?,?,?,?)",
                  (hit_id, req, type_id, now, now + p["LifetimeInSeconds"], max_a, question,
                   p.get("RequesterAnnotation"), unit))
        self._remember(c, req, "hit", p.get("UniqueRequestToken"), hit_id, now)
        return {"HIT": self._hit_out(self._hit_row(c, hit_id), now)}

    def _hit_row(self, c, hit_id: str, requester: str | None = None) -> sqlite3.Row:
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

    def op_GetHIT(self, c, req, p, now):
        return {"HIT": self._hit_out(self._hit_row(c, p["HITId"], req), now)}

    _HIT_SELECT = ("SELECT h.*, t.title, t.description, t.reward_cents, t.duration, t.auto_approval, t.keywords, t.quals "
                   "FROM hits h JOIN hit_types t ON t.id=h.hit_type_id ")

    def op_ListHITs(self, c, req, p, now):
        limit, after = self._page_args(p, "hits")
        rows = c.execute(self._HIT_SELECT + "WHERE h.requester=? AND h.disposed=0 AND h.seq>? ORDER BY h.seq LIMIT ?",
                         (req, after, limit + 1)).fetchall()
        rows, token = self._page(rows, limit, "hits", lambda r: r["seq"])
        return self._listing("HITs", [self._hit_out(r, now) for r in rows], token)

    @staticmethod
    def _listing(key: str, items: list, token: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {"NumResults": len(items), key: items}
        if token:
            out["NextToken"] = token
        return out

    def op_ListReviewableHITs(self, c, req, p, now):
        limit, after = self._page_args(p, "reviewable")
        status = p.get("Status", "Reviewable")
        if status == "Reviewing":
            cond = "h.reviewing=1"
            args: tuple = ()
        else:
            cond = ("h.reviewing=0 AND h.n_accepted=0 AND (h.expiration<=? OR "
                    "h.n_submitted+h.n_approved+h.n_rejected>=h.max_assignments)")
            args = (now,)
        sql = "SELECT h.seq, h.id FROM hits h WHERE h.requester=? AND h.disposed=0 AND h.seq>? AND " + cond
        if p.get("HITTypeId"):
            sql += " AND h.hit_type_id=?"
            args = args + (p["HITTypeId"],)
        rows = c.execute(sql + " ORDER BY h.seq LIMIT ?", (req, after, *args, limit + 1)).fetchall()
        rows, token = self._page(rows, limit, "reviewable", lambda r: r["seq"])
        # MTurk lists only the ids here; callers GetHIT what they need.
        return self._listing("HITs", [{"HITId": r["id"]} for r in rows], token)

    def op_UpdateExpirationForHIT(self, c, req, p, now):
        h = self._hit_row(c, p["HITId"], req)
        at = float(int(p["ExpireAt"]))
        implicit = f"{h['id']}{int(at)}"
        if self._token_seen(c, req, "expire", implicit, now):
            raise _invalid(f'The idempotency token "{implicit}" has already been processed.')
        if h["disposed"]:
            raise TurkError("InvalidHITState", "This HIT is currently in the state 'Disposed'. This operation cannot be called on a disposed HIT.")
        new = now if at <= now else at
        if at > now and h["expiration"] <= now - DISPOSE_AFTER:
            raise TurkError("HITTooOldForExtension", f"Hit {h['id']} is too old to be extended.")
        c.execute("UPDATE hits SET expiration=? WHERE id=?", (new, h["id"]))
        self._remember(c, req, "expire", implicit, h["id"], now)
        return {}

    def op_CreateAdditionalAssignmentsForHIT(self, c, req, p, now):
        h = self._hit_row(c, p["HITId"], req)
        n = p["NumberOfAdditionalAssignments"]
        token = p.get("UniqueRequestToken")
        seen = self._token_seen(c, req, "extend", token, now)
        if seen:
            raise _invalid(f'The request with unique request token "{token}" has already been processed ({seen}).')
        if n < 1:
            raise validation_error([range_problem("NumberOfAdditionalAssignments", n, 1, None)])
        if h["disposed"]:
            raise TurkError("InvalidHITState", "This HIT is currently in the state 'Disposed'. This operation can be called with a status of: Assignable, Unassignable, Reviewable, Reviewing")
        old = h["max_assignments"]
        if old < 10 <= old + n:
            raise TurkError("InvalidMaximumAssignmentsIncrease",
                            f"The HIT has {old} assignments; a HIT created with fewer than 10 assignments cannot be extended to 10 or more.")
        self._require_funds(c, req, h["unit_cost_cents"] * n, now, liability=True)
        c.execute("UPDATE hits SET max_assignments=max_assignments+? WHERE id=?", (n, h["id"]))
        self._remember(c, req, "extend", token, f"{h['id']}:{n}", now)
        return {}

    def op_DeleteHIT(self, c, req, p, now):
        h = self._hit_row(c, p["HITId"], req)
        if h["disposed"]:
            return {}
        status = self.hit_status(h, now)
        if status not in ("Reviewable", "Reviewing") or h["n_submitted"] > 0:
            raise TurkError("InvalidHITState", f"This HIT is currently in the state '{status}'. "
                            "This operation can be called with a status of: Reviewing, Reviewable")
        c.execute("UPDATE hits SET disposed=1 WHERE id=?", (h["id"],))
        return {}

    def op_UpdateHITReviewStatus(self, c, req, p, now):
        h = self._hit_row(c, p["HITId"], req)
        status = self.hit_status(h, now)
        if p.get("Revert"):
            if status != "Reviewing":
                raise TurkError("InvalidHITState", f"This HIT is currently in the state '{status}'. This operation can be called with a status of: Reviewing")
            c.execute("UPDATE hits SET reviewing=0 WHERE id=?", (h["id"],))
        else:
            if status != "Reviewable":
                raise TurkError("InvalidHITState", f"This HIT is currently in the state '{status}'. This operation can be called with a status of: Reviewable")
            c.execute("UPDATE hits SET reviewing=1 WHERE id=?", (h["id"],))
        return {}

    # -- assignments ----------------------------------------------------------------------------------
    @staticmethod
    def _asg_out(a: sqlite3.Row) -> dict[str, Any]:
        out = {
            "AssignmentId": a["id"], "WorkerId": a["worker_id"], "HITId": a["hit_id"], "AssignmentStatus": a["status"],
            "AutoApprovalTime": a["auto_approval_time"], "AcceptTime": a["accept_time"], "SubmitTime": a["submit_time"],
            "ApprovalTime": a["approval_time"], "RejectionTime": a["rejection_time"], "Deadline": a["deadline"],
            "Answer": a["answer"], "RequesterFeedback": a["feedback"],
        }
        return {k: v for k, v in out.items() if v is not None}

    def _visible_asg(self, c, req: str, aid: str, now: float) -> tuple[sqlite3.Row, sqlite3.Row]:
        a = c.execute("SELECT * FROM assignments WHERE id=?", (aid,)).fetchone()
        if a is None or a["status"] not in VISIBLE or (self.visibility_lag and a["submit_time"] > now - self.visibility_lag):
            raise TurkError("AssignmentDoesNotExist", f"Assignment {aid} does not exist.")
        try:
            h = self._hit_row(c, a["hit_id"], req)
        except TurkError:
            raise TurkError("AssignmentDoesNotExist", f"Assignment {aid} does not exist.") from None
        return a, h

    def op_ListAssignmentsForHIT(self, c, req, p, now):
        self._hit_row(c, p["HITId"], req)
        limit, after = self._page_args(p, "asg")
        statuses = p.get("AssignmentStatuses") or list(VISIBLE)
        marks = ",".join("?" * len(statuses))
        sql = f"SELECT * FROM assignments WHERE hit_id=? AND seq>? AND status IN ({marks})"
        args: list = [p["HITId"], after, *statuses]
        if self.visibility_lag:
            sql += " AND submit_time<=?"
            args.append(now - self.visibility_lag)
        rows = c.execute(sql + " ORDER BY seq LIMIT ?", (*args, limit + 1)).fetchall()
        rows, token = self._page(rows, limit, "asg", lambda r: r["seq"])
        return self._listing("Assignments", [self._asg_out(r) for r in rows], token)

    def op_GetAssignment(self, c, req, p, now):
        a, h = self._visible_asg(c, req, p["AssignmentId"], now)
        return {"Assignment": self._asg_out(a), "HIT": self._hit_out(h, now)}

    def op_ApproveAssignment(self, c, req, p, now):
        a, h = self._visible_asg(c, req, p["AssignmentId"], now)
        fb = p.get("RequesterFeedback")
        if fb is not None and len(fb) > 1024:
            raise validation_error([range_problem("RequesterFeedback", fb, None, 1024, length=True)])
        if a["status"] == "Rejected" and p.get("OverrideRejection"):
            if h["disposed"] or (a["rejection_time"] or 0) < now - OVERRIDE_WINDOW:
                raise TurkError("InvalidAssignmentState", "A rejection can be overridden only within 30 days and while the HIT exists.")
            c.execute("UPDATE workers SET rejected_here=MAX(rejected_here-1,0) WHERE id=?", (a["worker_id"],))
        elif a["status"] != "Submitted":
            raise TurkError("InvalidAssignmentState", "This operation can be called with a status of: Submitted")
        self._require_funds(c, req, h["unit_cost_cents"], now, liability=False)
        self._move(c, a["id"], a["hit_id"], a["status"], "Approved", approval_time=now, feedback=fb)
        self._charge(c, req, h["unit_cost_cents"])
        c.execute("UPDATE workers SET approved_here=approved_here+1 WHERE id=?", (a["worker_id"],))
        return {}

    def op_RejectAssignment(self, c, req, p, now):
        a, h = self._visible_asg(c, req, p["AssignmentId"], now)
        fb = p["RequesterFeedback"]
        if len(fb) > 1024:
            raise validation_error([range_problem("RequesterFeedback", fb, None, 1024, length=True)])
        if a["status"] != "Submitted":
            raise TurkError("InvalidAssignmentState", "This operation can be called with a status of: Submitted")
        self._move(c, a["id"], a["hit_id"], "Submitted", "Rejected", rejection_time=now, feedback=fb)
        c.execute("UPDATE workers SET rejected_here=rejected_here+1 WHERE id=?", (a["worker_id"],))
        return {}

    # -- bonuses --------------------------------------------------------------------------------------
    def op_SendBonus(self, c, req, p, now):
        token = p.get("UniqueRequestToken")
        seen = self._token_seen(c, req, "bonus", token, now)
        if seen:
            raise _invalid(f'The idempotency token "{token}" has already been processed (bonus {seen}).')
        try:
            amount = parse_amount(p["BonusAmount"])
        except ValueError as exc:
            raise _invalid(str(exc)) from None
        if amount <= 0:
            raise _invalid("The bonus amount must be greater than zero.")
        a, h = self._visible_asg(c, req, p["AssignmentId"], now)
        if a["worker_id"] != p["WorkerId"]:
            raise _invalid(f"Worker {p['WorkerId']} did not work assignment {a['id']}.")
        total = cents(amount + bonus_fee(amount))
        self._require_funds(c, req, total, now, liability=False)
        cur = c.execute("INSERT INTO bonuses (requester, worker_id, assignment_id, hit_id, amount_cents, reason, grant_time) "
                        "VALUES (?,?,?,?,?,?,?)", (req, a["worker_id"], a["id"], a["hit_id"], cents(amount), p["Reason"], now))
        self._charge(c, req, total)
        self._remember(c, req, "bonus", token, str(cur.lastrowid), now)
        return {}

    def op_ListBonusPayments(self, c, req, p, now):
        if bool(p.get("HITId")) == bool(p.get("AssignmentId")):
            raise _invalid("Provide exactly one of HITId or AssignmentId.")
        limit, after = self._page_args(p, "bonus")
        if p.get("HITId"):
            self._hit_row(c, p["HITId"], req)
            col, val = "hit_id", p["HITId"]
        else:
            col, val = "assignment_id", p["AssignmentId"]
        rows = c.execute(f"SELECT * FROM bonuses WHERE requester=? AND {col}=? AND seq>? ORDER BY seq LIMIT ?",
                         (req, val, after, limit + 1)).fetchall()
        rows, token = self._page(rows, limit, "bonus", lambda r: r["seq"])
        items = [{"WorkerId": r["worker_id"], "BonusAmount": fmt(dollars(r["amount_cents"])), "AssignmentId": r["assignment_id"],
                  "Reason": r["reason"], "GrantTime": r["grant_time"]} for r in rows]
        return self._listing("BonusPayments", items, token)

    # -- blocks ---------------------------------------------------------------------------------------
    def op_CreateWorkerBlock(self, c, req, p, now):
        c.execute("INSERT INTO blocks (requester, worker_id, reason) VALUES (?,?,?) "
                  "ON CONFLICT (requester, worker_id) DO UPDATE SET reason=excluded.reason", (req, p["WorkerId"], p["Reason"]))
        return {}

    def op_DeleteWorkerBlock(self, c, req, p, now):
        c.execute("DELETE FROM blocks WHERE requester=? AND worker_id=?", (req, p["WorkerId"]))
        return {}

    def op_ListWorkerBlocks(self, c, req, p, now):
        limit, after = self._page_args(p, "blocks")
        rows = c.execute("SELECT * FROM blocks WHERE requester=? AND seq>? ORDER BY seq LIMIT ?", (req, after, limit + 1)).fetchall()
        rows, token = self._page(rows, limit, "blocks", lambda r: r["seq"])
        return self._listing("WorkerBlocks", [{"WorkerId": r["worker_id"], "Reason": r["reason"]} for r in rows], token)

    # -- account --------------------------------------------------------------------------------------
    def op_GetAccountBalance(self, c, req, p, now):
        if self.mode == "sandbox":
            return {"AvailableBalance": fmt(SANDBOX_BALANCE)}
        return {"AvailableBalance": fmt(dollars(self._available_cents(c, req))),
                "OnHoldBalance": fmt(dollars(self._liability_cents(c, req, now)))}

    # -- qualifications -------------------------------------------------------------------------------
    def _qt_out(self, r: sqlite3.Row) -> dict[str, Any]:
        out = {"QualificationTypeId": r["id"], "CreationTime": r["creation"], "Name": r["name"],
               "Description": r["description"], "Keywords": r["keywords"], "QualificationTypeStatus": r["status"],
               "RetryDelayInSeconds": r["retry_delay"], "IsRequestable": bool(r["auto_granted"]),
               "AutoGranted": bool(r["auto_granted"])}
        if r["auto_granted"]:
            out["AutoGrantedValue"] = r["auto_value"]
        return {k: v for k, v in out.items() if v is not None}

    def op_CreateQualificationType(self, c, req, p, now):
        if p.get("Test") or p.get("AnswerKey"):
            raise _invalid("Qualification tests are not supported by this marketplace.")
        if c.execute("SELECT 1 FROM qual_types WHERE requester=? AND name=?", (req, p["Name"])).fetchone():
            raise TurkError("QualificationTypeAlreadyExists",
                            f"You have already created a QualificationType with this name. A QualificationType's name must be unique among all of the QualificationTypes created by the same user. ({p['Name']})")
        qid = new_id()
        c.execute("INSERT INTO qual_types (id, requester, name, description, keywords, status, creation, retry_delay, "
                  "auto_granted, auto_value) VALUES (?,?,?,?,?,?,?,?,?,?)",
                  (qid, req, p["Name"], p["Description"], p.get("Keywords"), p["QualificationTypeStatus"], now,
                   p.get("RetryDelayInSeconds"), int(bool(p.get("AutoGranted"))), int(p.get("AutoGrantedValue", 1))))
        return {"QualificationType": self._qt_out(c.execute("SELECT * FROM qual_types WHERE id=?", (qid,)).fetchone())}

    def _qual_type(self, c, qid: str, owner: str | None = None) -> sqlite3.Row:
        r = c.execute("SELECT * FROM qual_types WHERE id=?", (qid,)).fetchone()
        if r is None:
            raise TurkError("QualificationTypeDoesNotExist", f"You requested a Qualification that does not exist. ({qid})")
        if owner is not None and r["requester"] != owner:
            raise TurkError("PermissionDenied", f"You do not own the QualificationType {qid}.")
        return r

    def op_GetQualificationType(self, c, req, p, now):
        qid = p["QualificationTypeId"]
        if qid in Q.SYSTEM_IDS:
            name = Q.SYSTEM_NAMES.get(qid, "Masters")
            return {"QualificationType": {"QualificationTypeId": qid, "Name": name, "Description": f"System qualification {name}",
                                          "QualificationTypeStatus": "Active", "IsRequestable": False, "AutoGranted": False}}
        return {"QualificationType": self._qt_out(self._qual_type(c, qid))}

    def op_ListQualificationTypes(self, c, req, p, now):
        limit, after = self._page_args(p, "qtypes")
        sql, args = "SELECT * FROM qual_types WHERE seq>?", [after]
        if p.get("MustBeOwnedByCaller"):
            sql += " AND requester=?"
            args.append(req)
        if p.get("Query"):
            sql += " AND (name LIKE ? OR description LIKE ?)"
            args += [f"%{p['Query']}%"] * 2
        rows = c.execute(sql + " ORDER BY seq LIMIT ?", (*args, limit + 1)).fetchall()
        rows, token = self._page(rows, limit, "qtypes", lambda r: r["seq"])
        return self._listing("QualificationTypes", [self._qt_out(r) for r in rows], token)

    def op_AssociateQualificationWithWorker(self, c, req, p, now):
        self._qual_type(c, p["QualificationTypeId"], owner=req)
        c.execute("INSERT INTO quals (qual_type_id, worker_id, value, granted) VALUES (?,?,?,?) "
                  "ON CONFLICT (qual_type_id, worker_id) DO UPDATE SET value=excluded.value, granted=excluded.granted",
                  (p["QualificationTypeId"], p["WorkerId"], int(p.get("IntegerValue", 1)), now))
        return {}

    def op_DisassociateQualificationFromWorker(self, c, req, p, now):
        self._qual_type(c, p["QualificationTypeId"], owner=req)
        cur = c.execute("DELETE FROM quals WHERE qual_type_id=? AND worker_id=?", (p["QualificationTypeId"], p["WorkerId"]))
        if cur.rowcount == 0:
            raise TurkError("QualificationDoesNotExist", f"Worker {p['WorkerId']} does not have qualification {p['QualificationTypeId']}.")
        return {}

    def op_ListWorkersWithQualificationType(self, c, req, p, now):
        self._qual_type(c, p["QualificationTypeId"], owner=req)
        limit, after = self._page_args(p, "quals")
        if p.get("Status") == "Revoked":
            rows: list = []
        else:
            rows = c.execute("SELECT * FROM quals WHERE qual_type_id=? AND seq>? ORDER BY seq LIMIT ?",
                             (p["QualificationTypeId"], after, limit + 1)).fetchall()
        rows, token = self._page(rows, limit, "quals", lambda r: r["seq"])
        items = [{"QualificationTypeId": r["qual_type_id"], "WorkerId": r["worker_id"], "GrantTime": r["granted"],
                  "IntegerValue": r["value"], "Status": "Granted"} for r in rows]
        return self._listing("Qualifications", items, token)

    def op_NotifyWorkers(self, c, req, p, now):
        problems = [x for x in (range_problem("Subject", p["Subject"], 1, 200, length=True),
                                range_problem("MessageText", p["MessageText"], 1, 4096, length=True),
                                range_problem("WorkerIds", p["WorkerIds"], 1, 100, length=True)) if x]
        if problems:
            raise validation_error(problems)
        failures = []
        for w in p["WorkerIds"]:
            known = c.execute("SELECT 1 FROM assignments a JOIN hits h ON h.id=a.hit_id WHERE a.worker_id=? AND h.requester=? "
                              "AND a.status IN ('Approved','Rejected') LIMIT 1", (w, req)).fetchone()
            if known is None:
                failures.append({"NotifyWorkersFailureCode": "HardFailure", "WorkerId": w,
                                 "NotifyWorkersFailureMessage": f"Cannot notify worker {w}: you have not approved or rejected any of their work."})
                continue
            c.execute("INSERT INTO notifications (requester, worker_id, subject, message, sent) VALUES (?,?,?,?,?)",
                      (req, w, p["Subject"], p["MessageText"], now))
        return {"NotifyWorkersFailureStatuses": failures}

    # -- worker side ----------------------------------------------------------------------------------
    def w_register(self, c, now, profile: dict[str, Any]) -> dict[str, Any]:
        wid = profile.get("WorkerId")
        if not isinstance(wid, str) or not wid or not wid.startswith("A") or not wid.isalnum() or not wid.isupper() or len(wid) > 64:
            raise WorkerError("InvalidWorkerId", "WorkerId must match ^A[A-Z0-9]+$")
        loc = profile.get("Locale") or {}
        c.execute("INSERT INTO workers (id, country, subdivision, prior_pct, prior_approved, masters) VALUES (?,?,?,?,?,?) "
                  "ON CONFLICT (id) DO UPDATE SET country=excluded.country, subdivision=excluded.subdivision, "
                  "prior_pct=excluded.prior_pct, prior_approved=excluded.prior_approved, masters=excluded.masters",
                  (wid, str(loc.get("Country", "US")), loc.get("Subdivision"), int(profile.get("PercentAssignmentsApproved", 100)),
                   int(profile.get("NumberHITsApproved", 0)), int(bool(profile.get("Masters", False)))))
        return {"WorkerId": wid}

    def _worker(self, c, wid: str) -> sqlite3.Row:
        w = c.execute("SELECT * FROM workers WHERE id=?", (wid,)).fetchone()
        if w is None:
            raise WorkerError("UnknownWorker", f"Worker {wid} is not registered; POST /worker/api/register first.", 404)
        return w

    def _values(self, c, w: sqlite3.Row) -> dict[str, Any]:
        """The worker's qualification values; the approval figures blend the prior with work done here."""
        prior_ok = w["prior_approved"]
        pct = max(1, w["prior_pct"])
        prior_bad = round(prior_ok * (100 - pct) / pct) if pct < 100 else 0
        ok, bad = prior_ok + w["approved_here"], prior_bad + w["rejected_here"]
        values: dict[str, Any] = {
            Q.LOCALE: {"Country": w["country"], "Subdivision": w["subdivision"]},
            Q.PERCENT_APPROVED: (round(100 * ok / (ok + bad)) if ok + bad else w["prior_pct"]),
            Q.NUMBER_APPROVED: ok, Q.ADULT: 1,
        }
        if w["masters"]:
            values.update({m: 1 for m in Q.MASTERS_IDS})
        for r in c.execute("SELECT qual_type_id, value FROM quals WHERE worker_id=?", (w["id"],)):
            values[r["qual_type_id"]] = r["value"]
        return values

    def _auto_grant(self, c, w: sqlite3.Row, reqs: list[dict], values: dict[str, Any], now: float) -> None:
        for r in reqs:
            qid = r["QualificationTypeId"]
            if qid in values or qid in Q.SYSTEM_IDS:
                continue
            qt = c.execute("SELECT auto_granted, auto_value FROM qual_types WHERE id=?", (qid,)).fetchone()
            if qt is not None and qt["auto_granted"]:
                values[qid] = qt["auto_value"]

    def _blocked(self, c, requester: str, wid: str) -> bool:
        return c.execute("SELECT 1 FROM blocks WHERE requester=? AND worker_id=?", (requester, wid)).fetchone() is not None

    def w_available(self, c, now, wid: str, limit: int) -> list[dict[str, Any]]:
        w = self._worker(c, wid)
        values = self._values(c, w)
        rows = c.execute(
            self._HIT_SELECT + "WHERE h.disposed=0 AND h.reviewing=0 AND h.expiration>? "
            "AND h.n_accepted+h.n_submitted+h.n_approved+h.n_rejected < h.max_assignments "
            "AND h.requester NOT IN (SELECT requester FROM blocks WHERE worker_id=?) "
            "AND h.id NOT IN (SELECT hit_id FROM assignments WHERE worker_id=? AND status IN ('Accepted','Submitted','Approved','Rejected')) "
            "ORDER BY h.seq", (now, wid, wid)).fetchall()
        out = []
        for h in rows:
            reqs = json.loads(h["quals"])
            if reqs:
                vals = dict(values)
                self._auto_grant(c, w, reqs, vals, now)
                if not Q.allowed(reqs, vals, "discover"):
                    continue
            used = h["n_accepted"] + h["n_submitted"] + h["n_approved"] + h["n_rejected"]
            out.append({"HITId": h["id"], "HITTypeId": h["hit_type_id"], "Title": h["title"], "Description": h["description"],
                        "Reward": fmt(dollars(h["reward_cents"])), "Keywords": h["keywords"] or "",
                        "AssignmentDurationInSeconds": h["duration"], "Expiration": h["expiration"],
                        "NumberOfAssignmentsAvailable": h["max_assignments"] - used, "CreationTime": h["creation"]})
            if len(out) >= limit:
                break
        return out

    def _live_hit(self, c, hit_id: str) -> sqlite3.Row:
        """The HIT as a worker may see it: a missing or disposed HIT is the same 404 to them."""
        try:
            h = self._hit_row(c, hit_id)
        except TurkError:
            h = None
        if h is None or h["disposed"]:
            raise WorkerError("HITNotFound", f"HIT {hit_id} does not exist.", 404)
        return h

    def w_preview(self, c, now, hit_id: str, wid: str | None) -> sqlite3.Row:
        h = self._live_hit(c, hit_id)
        if wid:
            w = c.execute("SELECT * FROM workers WHERE id=?", (wid,)).fetchone()
            reqs = json.loads(h["quals"])
            if w is not None and reqs:
                vals = self._values(c, w)
                self._auto_grant(c, w, reqs, vals, now)
                if not Q.allowed(reqs, vals, "preview"):
                    raise WorkerError("DoesNotMeetRequirements", "You do not meet the qualification requirements to preview this HIT.", 403)
        return h

    def w_accept(self, c, now, wid: str, hit_id: str) -> dict[str, Any]:
        w = self._worker(c, wid)
        h = self._live_hit(c, hit_id)
        if self._blocked(c, h["requester"], wid):
            raise WorkerError("Blocked", "This requester has blocked you from working on their HITs.", 403)
        reqs = json.loads(h["quals"])
        if reqs:
            vals = self._values(c, w)
            self._auto_grant(c, w, reqs, vals, now)
            if not Q.allowed(reqs, vals, "accept"):
                raise WorkerError("DoesNotMeetRequirements", "You do not meet the qualification requirements to accept this HIT.", 403)
            for r in reqs:  # an auto-granted qualification becomes the worker's for good
                qid = r["QualificationTypeId"]
                if qid not in Q.SYSTEM_IDS and vals.get(qid) is not None:
                    c.execute("INSERT OR IGNORE INTO quals (qual_type_id, worker_id, value, granted) VALUES (?,?,?,?)",
                              (qid, wid, vals[qid], now))
        if c.execute("SELECT 1 FROM assignments WHERE hit_id=? AND worker_id=? AND status IN "
                     "('Accepted','Submitted','Approved','Rejected')", (hit_id, wid)).fetchone():
            raise WorkerError("AlreadyWorked", "You have already worked on this HIT.", 409)
        if self.hit_status(h, now) != "Assignable":
            raise WorkerError("NoAvailableSlot", "This HIT has no assignment available.", 409)
        aid = new_id()
        deadline = now + h["duration"]
        c.execute("INSERT INTO assignments (id, hit_id, worker_id, status, accept_time, deadline) VALUES (?,?,?,?,?,?)",
                  (aid, hit_id, wid, "Accepted", now, deadline))
        c.execute("UPDATE hits SET n_accepted=n_accepted+1 WHERE id=?", (hit_id,))
        return {"AssignmentId": aid, "Deadline": deadline, "HITId": hit_id}

    def _active(self, c, aid: str, now: float) -> tuple[sqlite3.Row, sqlite3.Row]:
        if aid == "ASSIGNMENT_ID_NOT_AVAILABLE":
            raise WorkerError("Preview", "This HIT is being previewed; accept it before submitting.", 400)
        a = c.execute("SELECT * FROM assignments WHERE id=?", (aid,)).fetchone()
        if a is None:
            raise WorkerError("AssignmentNotFound", f"Assignment {aid} does not exist.", 404)
        if a["status"] != "Accepted":
            raise WorkerError("AssignmentNotActive", f"Assignment {aid} is {a['status']}, not open for work.", 409)
        return a, self._hit_row(c, a["hit_id"])

    def w_task(self, c, now, aid: str) -> tuple[sqlite3.Row, sqlite3.Row]:
        return self._active(c, aid, now)

    def w_submit(self, c, now, aid: str, fields: list[tuple[str, str]]) -> dict[str, Any]:
        a, h = self._active(c, aid, now)
        xml = build_answer_xml(fields)
        self._move(c, aid, a["hit_id"], "Accepted", "Submitted", submit_time=now, answer=xml,
                   auto_approval_time=now + h["auto_approval"])
        return {"AssignmentId": aid, "HITId": a["hit_id"]}

    def w_return(self, c, now, aid: str) -> dict[str, Any]:
        a, _ = self._active(c, aid, now)
        self._move(c, aid, a["hit_id"], "Accepted", "Returned")
        return {"AssignmentId": aid}


def check_question(question: str) -> None:
    """The Question must be well-formed XML of a known root and at most 64 KiB, as MTurk requires."""
    if len(question.encode("utf-8")) > 65_535:
        raise validation_error([range_problem("Question", "...", None, 65_535, length=True)])
    try:
        root = ET.fromstring(question)
    except ET.ParseError as exc:
        raise TurkError("XMLParseError", f"There was an error parsing the XML question or answer data in your request: {exc}") from None
    local = root.tag.rsplit("}", 1)[-1]
    if local not in QUESTION_ROOTS:
        raise TurkError("XMLParseError", f"The Question root element {local} is not one of {', '.join(sorted(QUESTION_ROOTS))}.")


def question_parts(question: str) -> dict[str, str]:
    """HTMLContent / ExternalURL / FrameHeight of a stored question."""
    root = ET.fromstring(question)
    out: dict[str, str] = {"kind": root.tag.rsplit("}", 1)[-1]}
    for child in root:
        out[child.tag.rsplit("}", 1)[-1]] = child.text or ""
    return out
