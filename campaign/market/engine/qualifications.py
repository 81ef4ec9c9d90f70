"""Requester operations on qualification types, the grants of them to workers, and workers' requests.

Requester-made types are requestable (MTurk's `IsRequestable` is False only for the types the system
assigns); a worker's request is granted at once for an AutoGranted type and otherwise waits for the
owner's AcceptQualificationRequest or RejectQualificationRequest. Deleting a type disposes it: it can
no longer be read, granted, requested or required by a new HIT, the HIT types requiring it go with
it, pending requests are rejected, and its name is free again. Grants already made stay in effect for
HITs already posted (MTurk keeps them "because the Qualifications might be needed for active HITs").
"""

from __future__ import annotations

import sqlite3
from typing import Any

from campaign.market import quals as Q
from campaign.market.engine.base import (
    Conn,
    EngineBase,
    Params,
    Result,
    WorkerError,
    invalid,
    new_id,
    unknown_worker,
)
from campaign.market.protocol import TurkError

# Pseudo sequence numbers that put the system types before every requester type in listings.
SYSTEM_SEQ = {qid: i - len(Q.SYSTEM_NAMES) for i, qid in enumerate(Q.SYSTEM_NAMES)}
TEST_PARAMS = ("Test", "AnswerKey", "TestDurationInSeconds")


def _system_out(qid: str) -> dict[str, Any]:
    name = Q.SYSTEM_NAMES[qid]
    return {"QualificationTypeId": qid, "Name": name, "Description": f"System qualification {name}",
            "QualificationTypeStatus": "Active", "IsRequestable": False, "AutoGranted": False}


class QualificationOps(EngineBase):
    @staticmethod
    def _qt_out(r: sqlite3.Row) -> dict[str, Any]:
        out = {"QualificationTypeId": r["id"], "CreationTime": r["creation"], "Name": r["name"],
               "Description": r["description"], "Keywords": r["keywords"], "QualificationTypeStatus": r["status"],
               "RetryDelayInSeconds": r["retry_delay"], "IsRequestable": True, "AutoGranted": bool(r["auto_granted"])}
        if r["auto_granted"]:
            out["AutoGrantedValue"] = r["auto_value"]
        return {k: v for k, v in out.items() if v is not None}

    def _qual_type(self, c: Conn, qid: str, owner: str | None = None) -> sqlite3.Row:
        """A live (not disposed) requester-made type; `owner` demands that the caller made it."""
        r = c.execute("SELECT * FROM qual_types WHERE id=? AND disposed=0", (qid,)).fetchone()
        if r is None:
            raise TurkError("QualificationTypeDoesNotExist", f"You requested a Qualification that does not exist. ({qid})")
        if owner is not None and r["requester"] != owner:
            raise TurkError("PermissionDenied", f"You do not own the QualificationType {qid}.")
        return r

    # -- types ----------------------------------------------------------------------------------------
    def op_CreateQualificationType(self, c: Conn, req: str, p: Params, now: float) -> Result:
        if any(p.get(k) for k in TEST_PARAMS):
            raise invalid("Qualification tests are not supported by this marketplace.")
        if c.execute("SELECT 1 FROM qual_types WHERE requester=? AND name=? AND disposed=0", (req, p["Name"])).fetchone():
            raise TurkError("QualificationTypeAlreadyExists",
                            "You have already created a QualificationType with this name. A QualificationType's name must be "
                            f"unique among all of the QualificationTypes created by the same user. ({p['Name']})")
        qid = new_id()
        c.execute("INSERT INTO qual_types (id, requester, name, description, keywords, status, creation, retry_delay, "
                  "auto_granted, auto_value) VALUES (?,?,?,?,?,?,?,?,?,?)",
                  (qid, req, p["Name"], p["Description"], p.get("Keywords"), p["QualificationTypeStatus"], now,
                   p.get("RetryDelayInSeconds"), int(bool(p.get("AutoGranted"))), int(p.get("AutoGrantedValue", 1))))
        return {"QualificationType": self._qt_out(self._qual_type(c, qid))}

    def op_GetQualificationType(self, c: Conn, req: str, p: Params, now: float) -> Result:
        qid = p["QualificationTypeId"]
        if qid in Q.SYSTEM_NAMES:
            return {"QualificationType": _system_out(qid)}
        return {"QualificationType": self._qt_out(self._qual_type(c, qid))}

    def op_UpdateQualificationType(self, c: Conn, req: str, p: Params, now: float) -> Result:
        qid = p["QualificationTypeId"]
        if qid in Q.SYSTEM_NAMES:
            raise TurkError("PermissionDenied", f"You do not own the QualificationType {qid}.")
        self._qual_type(c, qid, owner=req)
        if any(p.get(k) for k in TEST_PARAMS):
            raise invalid("Qualification tests are not supported by this marketplace.")
        columns = {"Description": "description", "QualificationTypeStatus": "status", "RetryDelayInSeconds": "retry_delay",
                   "AutoGranted": "auto_granted", "AutoGrantedValue": "auto_value"}
        changes = {col: (int(p[k]) if k in ("AutoGranted", "AutoGrantedValue") else p[k]) for k, col in columns.items() if k in p}
        if changes:
            sets = ", ".join(f"{col}=?" for col in changes)
            c.execute(f"UPDATE qual_types SET {sets} WHERE id=?", (*changes.values(), qid))
        return {"QualificationType": self._qt_out(self._qual_type(c, qid))}

    def op_DeleteQualificationType(self, c: Conn, req: str, p: Params, now: float) -> Result:
        qid = p["QualificationTypeId"]
        if qid in Q.SYSTEM_NAMES:
            raise TurkError("PermissionDenied", f"You do not own the QualificationType {qid}.")
        self._qual_type(c, qid, owner=req)
        c.execute("UPDATE qual_types SET disposed=1 WHERE id=?", (qid,))
        c.execute("UPDATE hit_types SET disposed=1 WHERE id IN (SELECT hit_type_id FROM hit_type_quals WHERE qual_type_id=?)", (qid,))
        c.execute("UPDATE qual_requests SET status='Rejected', answered=?, reason=? WHERE qual_type_id=? AND status='Pending'",
                  (now, "The Qualification type was deleted by its owner.", qid))
        return {}

    def op_ListQualificationTypes(self, c: Conn, req: str, p: Params, now: float) -> Result:
        limit, after = self._page_args(p, "qtypes")
        if not p.get("NextToken"):
            after = min(SYSTEM_SEQ.values()) - 1
        query = (p.get("Query") or "").lower()
        items: list[tuple[int, dict[str, Any]]] = []
        if not p["MustBeRequestable"] and not p.get("MustBeOwnedByCaller"):
            # MustBeRequestable=False considers "all Qualification types, including those managed by the system".
            items += [(seq, _system_out(qid)) for qid, seq in SYSTEM_SEQ.items()
                      if seq > after and (not query or query in Q.SYSTEM_NAMES[qid].lower())]
        sql = "SELECT * FROM qual_types WHERE disposed=0 AND seq>?"
        args: list[Any] = [max(after, 0)]
        if p.get("MustBeOwnedByCaller"):
            sql += " AND requester=?"
            args.append(req)
        if query:
            sql += " AND (name LIKE ? OR description LIKE ? OR keywords LIKE ?)"
            args += [f"%{p['Query']}%"] * 3
        rows = c.execute(sql + " ORDER BY seq LIMIT ?", (*args, limit + 1)).fetchall()
        items += [(r["seq"], self._qt_out(r)) for r in rows]
        page, token = self._page(items, limit, "qtypes", lambda item: item[0])
        return self._listing("QualificationTypes", [out for _, out in page], token)

    # -- grants ---------------------------------------------------------------------------------------
    def op_AssociateQualificationWithWorker(self, c: Conn, req: str, p: Params, now: float) -> Result:
        self._qual_type(c, p["QualificationTypeId"], owner=req)
        if c.execute("SELECT 1 FROM workers WHERE id=?", (p["WorkerId"],)).fetchone() is None:
            raise unknown_worker(p["WorkerId"])
        self._grant(c, p["QualificationTypeId"], p["WorkerId"], int(p.get("IntegerValue", 1)), now)
        return {}

    @staticmethod
    def _grant(c: Conn, qid: str, wid: str, value: int, now: float) -> None:
        c.execute("INSERT INTO quals (qual_type_id, worker_id, value, granted) VALUES (?,?,?,?) "
                  "ON CONFLICT (qual_type_id, worker_id) DO UPDATE SET value=excluded.value, granted=excluded.granted",
                  (qid, wid, value, now))

    def op_DisassociateQualificationFromWorker(self, c: Conn, req: str, p: Params, now: float) -> Result:
        self._qual_type(c, p["QualificationTypeId"], owner=req)
        cur = c.execute("DELETE FROM quals WHERE qual_type_id=? AND worker_id=?", (p["QualificationTypeId"], p["WorkerId"]))
        if cur.rowcount == 0:
            raise TurkError("QualificationDoesNotExist", f"Worker {p['WorkerId']} does not have qualification {p['QualificationTypeId']}.")
        return {}

    def op_GetQualificationScore(self, c: Conn, req: str, p: Params, now: float) -> Result:
        qid, wid = p["QualificationTypeId"], p["WorkerId"]
        if qid in Q.SYSTEM_NAMES:
            raise TurkError("PermissionDenied", f"You do not own the QualificationType {qid}.")
        self._qual_type(c, qid, owner=req)  # only the type's owner may read a worker's score
        r = c.execute("SELECT * FROM quals WHERE qual_type_id=? AND worker_id=?", (qid, wid)).fetchone()
        if r is None:
            raise TurkError("QualificationDoesNotExist", f"You requested a Qualification that does not exist. ({qid}, {wid})")
        return {"Qualification": self._qual_out(r)}

    @staticmethod
    def _qual_out(r: sqlite3.Row) -> dict[str, Any]:
        return {"QualificationTypeId": r["qual_type_id"], "WorkerId": r["worker_id"], "GrantTime": r["granted"],
                "IntegerValue": r["value"], "Status": "Granted"}

    def op_ListWorkersWithQualificationType(self, c: Conn, req: str, p: Params, now: float) -> Result:
        self._qual_type(c, p["QualificationTypeId"], owner=req)
        limit, after = self._page_args(p, "quals")
        if p.get("Status") == "Revoked":
            rows: list = []  # a revoked grant is deleted here, so there are never revoked ones to list
        else:
            rows = c.execute("SELECT * FROM quals WHERE qual_type_id=? AND seq>? ORDER BY seq LIMIT ?",
                             (p["QualificationTypeId"], after, limit + 1)).fetchall()
        rows, token = self._page(rows, limit, "quals", lambda r: r["seq"])
        return self._listing("Qualifications", [self._qual_out(r) for r in rows], token)

    def op_ListHITsForQualificationType(self, c: Conn, req: str, p: Params, now: float) -> Result:
        qid = p["QualificationTypeId"]
        if qid not in Q.SYSTEM_NAMES:
            self._qual_type(c, qid)  # anyone's type may be asked about; only the caller's own HITs are listed
        limit, after = self._page_args(p, "qhits")
        rows = c.execute(self._HIT_SELECT + "JOIN hit_type_quals q ON q.hit_type_id=h.hit_type_id "
                         "WHERE q.qual_type_id=? AND h.requester=? AND h.disposed=0 AND h.seq>? ORDER BY h.seq LIMIT ?",
                         (qid, req, after, limit + 1)).fetchall()
        rows, token = self._page(rows, limit, "qhits", lambda r: r["seq"])
        return self._listing("HITs", [self._hit_out(r, now) for r in rows], token)

    # -- requests -------------------------------------------------------------------------------------
    def op_ListQualificationRequests(self, c: Conn, req: str, p: Params, now: float) -> Result:
        limit, after = self._page_args(p, "qreqs")
        sql = ("SELECT r.* FROM qual_requests r JOIN qual_types t ON t.id=r.qual_type_id "
               "WHERE t.requester=? AND t.disposed=0 AND r.status='Pending' AND r.seq>?")
        args: list[Any] = [req, after]
        if p.get("QualificationTypeId"):
            self._qual_type(c, p["QualificationTypeId"], owner=req)
            sql += " AND r.qual_type_id=?"
            args.append(p["QualificationTypeId"])
        rows = c.execute(sql + " ORDER BY r.seq LIMIT ?", (*args, limit + 1)).fetchall()
        rows, token = self._page(rows, limit, "qreqs", lambda r: r["seq"])
        items = [{"QualificationRequestId": r["id"], "QualificationTypeId": r["qual_type_id"], "WorkerId": r["worker_id"],
                  "SubmitTime": r["submit_time"]} for r in rows]
        return self._listing("QualificationRequests", items, token)

    def _pending_request(self, c: Conn, req: str, rid: str) -> sqlite3.Row:
        r = c.execute("SELECT r.*, t.requester FROM qual_requests r JOIN qual_types t ON t.id=r.qual_type_id "
                      "WHERE r.id=? AND t.disposed=0", (rid,)).fetchone()
        if r is None or r["requester"] != req:
            raise invalid(f"QualificationRequest {rid} does not exist.")
        if r["status"] != "Pending":
            raise invalid(f"QualificationRequest {rid} has already been {r['status'].lower()}.")
        return r

    def op_AcceptQualificationRequest(self, c: Conn, req: str, p: Params, now: float) -> Result:
        r = self._pending_request(c, req, p["QualificationRequestId"])
        self._grant(c, r["qual_type_id"], r["worker_id"], int(p.get("IntegerValue", 1)), now)
        c.execute("UPDATE qual_requests SET status='Granted', answered=? WHERE id=?", (now, r["id"]))
        return {}

    def op_RejectQualificationRequest(self, c: Conn, req: str, p: Params, now: float) -> Result:
        r = self._pending_request(c, req, p["QualificationRequestId"])
        c.execute("UPDATE qual_requests SET status='Rejected', answered=?, reason=? WHERE id=?", (now, p.get("Reason"), r["id"]))
        return {}

    # -- the worker's side of requests ----------------------------------------------------------------
    def w_request_qualification(self, c: Conn, now: float, wid: str, qid: str) -> dict[str, Any]:
        """A worker asks for a requestable type: granted at once if AutoGranted, else pending for its owner.

        Without a RetryDelayInSeconds a worker may ask only once (as MTurk documents); with one, again
        after that many seconds since the last request.
        """
        if c.execute("SELECT 1 FROM workers WHERE id=?", (wid,)).fetchone() is None:
            raise WorkerError("UnknownWorker", f"Worker {wid} is not registered.", 404)
        t = c.execute("SELECT * FROM qual_types WHERE id=? AND disposed=0", (qid,)).fetchone()
        if t is None:
            raise WorkerError("QualificationTypeNotFound", f"Qualification type {qid} does not exist or cannot be requested.", 404)
        if t["status"] != "Active":
            raise WorkerError("QualificationTypeInactive", f"Qualification type {qid} is not accepting requests.", 409)
        last = c.execute("SELECT status, submit_time FROM qual_requests WHERE worker_id=? AND qual_type_id=? "
                         "ORDER BY seq DESC LIMIT 1", (wid, qid)).fetchone()
        if last is not None:
            if last["status"] == "Pending":
                raise WorkerError("RequestPending", "You already have a pending request for this qualification.", 409)
            if t["retry_delay"] is None:
                raise WorkerError("RetryNotAllowed", "This qualification can be requested only once.", 409)
            if now < last["submit_time"] + t["retry_delay"]:
                raise WorkerError("RetryTooSoon", f"You can request this qualification again after {t['retry_delay']} s.", 409)
        rid = new_id()
        status = "Granted" if t["auto_granted"] else "Pending"
        c.execute("INSERT INTO qual_requests (id, qual_type_id, worker_id, status, submit_time, answered) VALUES (?,?,?,?,?,?)",
                  (rid, qid, wid, status, now, now if t["auto_granted"] else None))
        if t["auto_granted"]:
            self._grant(c, qid, wid, t["auto_value"], now)
        return {"QualificationRequestId": rid, "QualificationTypeId": qid, "Status": status}

    def w_qualification_requests(self, c: Conn, now: float, wid: str) -> list[dict[str, Any]]:
        """The worker's own requests with their outcome and the owner's reason for a rejection."""
        rows = c.execute("SELECT * FROM qual_requests WHERE worker_id=? ORDER BY seq", (wid,)).fetchall()
        return [{k: v for k, v in {"QualificationRequestId": r["id"], "QualificationTypeId": r["qual_type_id"],
                                   "Status": r["status"], "SubmitTime": r["submit_time"], "Reason": r["reason"]}.items()
                 if v is not None} for r in rows]
