"""Requester operations on submitted work and on workers: assignments (list, get, approve, reject),
bonuses, blocks, the account balance and NotifyWorkers.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from campaign.market.engine.base import (
    OVERRIDE_WINDOW,
    SANDBOX_BALANCE,
    VISIBLE,
    Conn,
    EngineBase,
    Params,
    Result,
    cents,
    check_ranges,
    dollars,
    invalid,
    money,
)
from campaign.market.protocol import TurkError, range_problem
from campaign.money import bonus_fee, fmt


class AssignmentOps(EngineBase):
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

    def _visible_asg(self, c: Conn, req: str, aid: str, now: float) -> tuple[sqlite3.Row, sqlite3.Row]:
        a = c.execute("SELECT * FROM assignments WHERE id=?", (aid,)).fetchone()
        if a is None or a["status"] not in VISIBLE or (self.visibility_lag and a["submit_time"] > now - self.visibility_lag):
            raise TurkError("AssignmentDoesNotExist", f"Assignment {aid} does not exist.")
        try:
            h = self._hit_row(c, a["hit_id"], req)
        except TurkError:
            raise TurkError("AssignmentDoesNotExist", f"Assignment {aid} does not exist.") from None
        return a, h

    def op_ListAssignmentsForHIT(self, c: Conn, req: str, p: Params, now: float) -> Result:
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

    def op_GetAssignment(self, c: Conn, req: str, p: Params, now: float) -> Result:
        a, h = self._visible_asg(c, req, p["AssignmentId"], now)
        return {"Assignment": self._asg_out(a), "HIT": self._hit_out(h, now)}

    def op_ApproveAssignment(self, c: Conn, req: str, p: Params, now: float) -> Result:
        a, h = self._visible_asg(c, req, p["AssignmentId"], now)
        fb = p.get("RequesterFeedback")
        if fb is not None and len(fb) > 1024:
            check_ranges(range_problem("RequesterFeedback", fb, None, 1024, length=True))
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

    def op_RejectAssignment(self, c: Conn, req: str, p: Params, now: float) -> Result:
        a, h = self._visible_asg(c, req, p["AssignmentId"], now)
        fb = p["RequesterFeedback"]
        if len(fb) > 1024:
            check_ranges(range_problem("RequesterFeedback", fb, None, 1024, length=True))
        if a["status"] != "Submitted":
            raise TurkError("InvalidAssignmentState", "This operation can be called with a status of: Submitted")
        self._move(c, a["id"], a["hit_id"], "Submitted", "Rejected", rejection_time=now, feedback=fb)
        c.execute("UPDATE workers SET rejected_here=rejected_here+1 WHERE id=?", (a["worker_id"],))
        return {}

    # -- bonuses --------------------------------------------------------------------------------------
    def op_SendBonus(self, c: Conn, req: str, p: Params, now: float) -> Result:
        token = p.get("UniqueRequestToken")
        seen = self._token_seen(c, req, "bonus", token, now)
        if seen:
            raise invalid(f'The idempotency token "{token}" has already been processed (bonus {seen}).')
        amount = money("BonusAmount", p["BonusAmount"])
        if amount <= 0:
            raise invalid("The bonus amount must be greater than zero.")
        a, h = self._visible_asg(c, req, p["AssignmentId"], now)
        if a["worker_id"] != p["WorkerId"]:
            raise invalid(f"Worker {p['WorkerId']} did not work assignment {a['id']}.")
        total = cents(amount + bonus_fee(amount))
        self._require_funds(c, req, total, now, liability=False)
        cur = c.execute("INSERT INTO bonuses (requester, worker_id, assignment_id, hit_id, amount_cents, reason, grant_time) "
                        "VALUES (?,?,?,?,?,?,?)", (req, a["worker_id"], a["id"], a["hit_id"], cents(amount), p["Reason"], now))
        self._charge(c, req, total)
        self._remember(c, req, "bonus", token, str(cur.lastrowid), now)
        return {}

    def op_ListBonusPayments(self, c: Conn, req: str, p: Params, now: float) -> Result:
        if bool(p.get("HITId")) == bool(p.get("AssignmentId")):
            raise invalid("Provide exactly one of HITId or AssignmentId.")
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
    def op_CreateWorkerBlock(self, c: Conn, req: str, p: Params, now: float) -> Result:
        c.execute("INSERT INTO blocks (requester, worker_id, reason) VALUES (?,?,?) "
                  "ON CONFLICT (requester, worker_id) DO UPDATE SET reason=excluded.reason", (req, p["WorkerId"], p["Reason"]))
        return {}

    def op_DeleteWorkerBlock(self, c: Conn, req: str, p: Params, now: float) -> Result:
        c.execute("DELETE FROM blocks WHERE requester=? AND worker_id=?", (req, p["WorkerId"]))
        return {}

    def op_ListWorkerBlocks(self, c: Conn, req: str, p: Params, now: float) -> Result:
        limit, after = self._page_args(p, "blocks")
        rows = c.execute("SELECT * FROM blocks WHERE requester=? AND seq>? ORDER BY seq LIMIT ?", (req, after, limit + 1)).fetchall()
        rows, token = self._page(rows, limit, "blocks", lambda r: r["seq"])
        return self._listing("WorkerBlocks", [{"WorkerId": r["worker_id"], "Reason": r["reason"]} for r in rows], token)

    # -- account --------------------------------------------------------------------------------------
    def op_GetAccountBalance(self, c: Conn, req: str, p: Params, now: float) -> Result:
        if self.mode == "sandbox":
            return {"AvailableBalance": fmt(SANDBOX_BALANCE)}
        return {"AvailableBalance": fmt(dollars(self._available_cents(c, req))),
                "OnHoldBalance": fmt(dollars(self._liability_cents(c, req, now)))}

    def op_NotifyWorkers(self, c: Conn, req: str, p: Params, now: float) -> Result:
        check_ranges(range_problem("Subject", p["Subject"], 1, 200, length=True),
                     range_problem("MessageText", p["MessageText"], 1, 4096, length=True),
                     range_problem("WorkerIds", p["WorkerIds"], 1, 100, length=True))
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

