"""Requester operations on qualification types and the grants of them to workers.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from campaign.market import quals as Q
from campaign.market.engine.base import Conn, EngineBase, Params, Result, invalid, new_id
from campaign.market.protocol import TurkError


class QualificationOps(EngineBase):
    # -- qualifications -------------------------------------------------------------------------------
    def _qt_out(self, r: sqlite3.Row) -> dict[str, Any]:
        out = {"QualificationTypeId": r["id"], "CreationTime": r["creation"], "Name": r["name"],
               "Description": r["description"], "Keywords": r["keywords"], "QualificationTypeStatus": r["status"],
               "RetryDelayInSeconds": r["retry_delay"], "IsRequestable": bool(r["auto_granted"]),
               "AutoGranted": bool(r["auto_granted"])}
        if r["auto_granted"]:
            out["AutoGrantedValue"] = r["auto_value"]
        return {k: v for k, v in out.items() if v is not None}

    def op_CreateQualificationType(self, c: Conn, req: str, p: Params, now: float) -> Result:
        if p.get("Test") or p.get("AnswerKey"):
            raise invalid("Qualification tests are not supported by this marketplace.")
        if c.execute("SELECT 1 FROM qual_types WHERE requester=? AND name=?", (req, p["Name"])).fetchone():
            raise TurkError("QualificationTypeAlreadyExists",
                            f"You have already created a QualificationType with this name. A QualificationType's name must be unique among all of the QualificationTypes created by the same user. ({p['Name']})")
        qid = new_id()
        c.execute("INSERT INTO qual_types (id, requester, name, description, keywords, status, creation, retry_delay, "
                  "auto_granted, auto_value) VALUES (?,?,?,?,?,?,?,?,?,?)",
                  (qid, req, p["Name"], p["Description"], p.get("Keywords"), p["QualificationTypeStatus"], now,
                   p.get("RetryDelayInSeconds"), int(bool(p.get("AutoGranted"))), int(p.get("AutoGrantedValue", 1))))
        return {"QualificationType": self._qt_out(c.execute("SELECT * FROM qual_types WHERE id=?", (qid,)).fetchone())}

    def _qual_type(self, c: Conn, qid: str, owner: str | None = None) -> sqlite3.Row:
        r = c.execute("SELECT * FROM qual_types WHERE id=?", (qid,)).fetchone()
        if r is None:
            raise TurkError("QualificationTypeDoesNotExist", f"You requested a Qualification that does not exist. ({qid})")
        if owner is not None and r["requester"] != owner:
            raise TurkError("PermissionDenied", f"You do not own the QualificationType {qid}.")
        return r

    def op_GetQualificationType(self, c: Conn, req: str, p: Params, now: float) -> Result:
        qid = p["QualificationTypeId"]
        if qid in Q.SYSTEM_IDS:
            name = Q.SYSTEM_NAMES.get(qid, "Masters")
            return {"QualificationType": {"QualificationTypeId": qid, "Name": name, "Description": f"System qualification {name}",
                                          "QualificationTypeStatus": "Active", "IsRequestable": False, "AutoGranted": False}}
        return {"QualificationType": self._qt_out(self._qual_type(c, qid))}

    def op_ListQualificationTypes(self, c: Conn, req: str, p: Params, now: float) -> Result:
        limit, after = self._page_args(p, "qtypes")
        sql = "SELECT * FROM qual_types WHERE seq>?"
        args: list[Any] = [after]
        if p.get("MustBeOwnedByCaller"):
            sql += " AND requester=?"
            args.append(req)
        if p.get("Query"):
            sql += " AND (name LIKE ? OR description LIKE ?)"
            args += [f"%{p['Query']}%"] * 2
        rows = c.execute(sql + " ORDER BY seq LIMIT ?", (*args, limit + 1)).fetchall()
        rows, token = self._page(rows, limit, "qtypes", lambda r: r["seq"])
        return self._listing("QualificationTypes", [self._qt_out(r) for r in rows], token)

    def op_AssociateQualificationWithWorker(self, c: Conn, req: str, p: Params, now: float) -> Result:
        self._qual_type(c, p["QualificationTypeId"], owner=req)
        c.execute("INSERT INTO quals (qual_type_id, worker_id, value, granted) VALUES (?,?,?,?) "
                  "ON CONFLICT (qual_type_id, worker_id) DO UPDATE SET value=excluded.value, granted=excluded.granted",
                  (p["QualificationTypeId"], p["WorkerId"], int(p.get("IntegerValue", 1)), now))
        return {}

    def op_DisassociateQualificationFromWorker(self, c: Conn, req: str, p: Params, now: float) -> Result:
        self._qual_type(c, p["QualificationTypeId"], owner=req)
        cur = c.execute("DELETE FROM quals WHERE qual_type_id=? AND worker_id=?", (p["QualificationTypeId"], p["WorkerId"]))
        if cur.rowcount == 0:
            raise TurkError("QualificationDoesNotExist", f"Worker {p['WorkerId']} does not have qualification {p['QualificationTypeId']}.")
        return {}

    def op_ListWorkersWithQualificationType(self, c: Conn, req: str, p: Params, now: float) -> Result:
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

