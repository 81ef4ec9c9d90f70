"""Requester operations on HIT types and HITs: creation (with UniqueRequestToken), listing, expiry,
extension, review status and disposal.
"""

from __future__ import annotations

import base64
import hashlib
import json

from campaign.market import quals as Q
from campaign.market.engine.base import (
    DISPOSE_AFTER,
    Conn,
    EngineBase,
    Params,
    Result,
    cents,
    check_ranges,
    dollars,
    invalid,
    money,
    new_id,
)
from campaign.market.engine.questions import check_question
from campaign.market.protocol import YEAR, TurkError, range_problem
from campaign.money import assignment_cost, fmt


class HITOps(EngineBase):
    # -- HIT types and HITs ---------------------------------------------------------------------------
    def _check_type_params(self, c: Conn, requester: str, p: Params) -> list[dict]:
        reqs = p.get("QualificationRequirements") or []
        check_ranges(
            range_problem("Title", p["Title"], 1, 128, length=True),
            range_problem("Description", p["Description"], 1, 2000, length=True),
            range_problem("Keywords", p.get("Keywords", ""), None, 1000, length=True),
            range_problem("AssignmentDurationInSeconds", p["AssignmentDurationInSeconds"], 30, 31_536_000),
            range_problem("AutoApprovalDelayInSeconds", p.get("AutoApprovalDelayInSeconds", 2_592_000), 0, 2_592_000),
            range_problem("QualificationRequirements", reqs, None, 10, length=True),
        )
        for r in reqs:
            why = Q.requirement_problem(r)
            if why:
                raise invalid(why)
            qid = r["QualificationTypeId"]
            if qid not in Q.SYSTEM_IDS and c.execute("SELECT 1 FROM qual_types WHERE id=? AND disposed=0", (qid,)).fetchone() is None:
                raise TurkError("QualificationTypeDoesNotExist", f"You requested a Qualification that does not exist. ({qid})")
        return reqs

    def _hit_type(self, c: Conn, requester: str, p: Params) -> str:
        reqs = self._check_type_params(c, requester, p)
        reward = money("Reward", p["Reward"])
        auto = int(p.get("AutoApprovalDelayInSeconds", 2_592_000))
        canon = json.dumps([requester, p["Title"], p["Description"], fmt(reward), p["AssignmentDurationInSeconds"],
                            auto, p.get("Keywords", ""), reqs], sort_keys=True)
        digest = hashlib.sha256(canon.encode()).digest()
        type_id = base64.b32encode(digest).decode()[:30]
        c.execute("INSERT OR IGNORE INTO hit_types (id, requester, title, description, reward_cents, duration, "
                  "auto_approval, keywords, quals, masters) VALUES (?,?,?,?,?,?,?,?,?,?)",
                  (type_id, requester, p["Title"], p["Description"], cents(reward), p["AssignmentDurationInSeconds"],
                   auto, p.get("Keywords"), json.dumps(reqs), int(Q.is_masters(reqs))))
        c.executemany("INSERT OR IGNORE INTO hit_type_quals (qual_type_id, hit_type_id) VALUES (?,?)",
                      [(r["QualificationTypeId"], type_id) for r in reqs])
        return type_id

    def op_CreateHITType(self, c: Conn, req: str, p: Params, now: float) -> Result:
        return {"HITTypeId": self._hit_type(c, req, p)}

    def op_CreateHIT(self, c: Conn, req: str, p: Params, now: float) -> Result:
        type_params: Params = {k: p[k] for k in ("Title", "Description", "Reward", "AssignmentDurationInSeconds",
                                         "AutoApprovalDelayInSeconds", "Keywords", "QualificationRequirements") if k in p}
        existing = self._token_seen(c, req, "hit", p.get("UniqueRequestToken"), now)
        if existing:
            raise self._hit_exists(existing, p["UniqueRequestToken"])
        type_id = self._hit_type(c, req, type_params)
        return self._create_hit(c, req, type_id, p, now)

    def op_CreateHITWithHITType(self, c: Conn, req: str, p: Params, now: float) -> Result:
        existing = self._token_seen(c, req, "hit", p.get("UniqueRequestToken"), now)
        if existing:
            raise self._hit_exists(existing, p["UniqueRequestToken"])
        if c.execute("SELECT 1 FROM hit_types WHERE id=? AND requester=? AND disposed=0", (p["HITTypeId"], req)).fetchone() is None:
            raise invalid(f"Hit type {p['HITTypeId']} does not exist.")
        return self._create_hit(c, req, p["HITTypeId"], p, now)

    @staticmethod
    def _hit_exists(hit_id: str, token: str) -> TurkError:
        return TurkError("HitAlreadyExists", f"The HIT with ID \"{hit_id}\" already exists. "
                         f"The request with unique request token \"{token}\" has already been processed.")

    def _create_hit(self, c: Conn, req, type_id: str, p: Params, now: float) -> dict:
        check_ranges(
            range_problem("LifetimeInSeconds", p["LifetimeInSeconds"], 30, 31_536_000),
            range_problem("MaxAssignments", p.get("MaxAssignments", 1), 1, 1_000_000_000),
            range_problem("RequesterAnnotation", p.get("RequesterAnnotation", ""), None, 255, length=True),
            range_problem("UniqueRequestToken", p.get("UniqueRequestToken", "x"), 1, 64, length=True),
        )
        if p.get("HITLayoutId") or p.get("HITLayoutParameters"):
            raise invalid("HIT layouts are not supported by this marketplace; send a Question.")
        if p.get("AssignmentReviewPolicy") or p.get("HITReviewPolicy"):
            raise invalid("Review policies are not supported by this marketplace.")
        question = p.get("Question")
        if not question:
            raise invalid("Either the Question parameter or the HITLayoutId parameter must be provided.")
        check_question(question)
        t = c.execute("SELECT * FROM hit_types WHERE id=?", (type_id,)).fetchone()
        max_a = int(p.get("MaxAssignments", 1))
        unit = cents(assignment_cost(dollars(t["reward_cents"]), max_a, bool(t["masters"])))
        self._require_funds(c, req, unit * max_a, now, liability=True)
        hit_id = new_id(scope=f"hit:{type_id}")
        c.execute("INSERT INTO hits (id, requester, hit_type_id, creation, expiration, max_assignments, question, "
                  "annotation, unit_cost_cents) VALUES (?,?,?,?,?,?,?,?,?)",
                  (hit_id, req, type_id, now, now + p["LifetimeInSeconds"], max_a, question,
                   p.get("RequesterAnnotation"), unit))
        self._remember(c, req, "hit", p.get("UniqueRequestToken"), hit_id, now)
        return {"HIT": self._hit_out(self._hit_row(c, hit_id), now)}

    def op_GetHIT(self, c: Conn, req: str, p: Params, now: float) -> Result:
        return {"HIT": self._hit_out(self._hit_row(c, p["HITId"], req), now)}
    def op_ListHITs(self, c: Conn, req: str, p: Params, now: float) -> Result:
        limit, after = self._page_args(p, "hits")
        rows = c.execute(self._HIT_SELECT + "WHERE h.requester=? AND h.disposed=0 AND h.seq>? ORDER BY h.seq LIMIT ?",
                         (req, after, limit + 1)).fetchall()
        rows, token = self._page(rows, limit, "hits", lambda r: r["seq"])
        return self._listing("HITs", [self._hit_out(r, now) for r in rows], token)

    def op_ListReviewableHITs(self, c: Conn, req: str, p: Params, now: float) -> Result:
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

    def op_UpdateExpirationForHIT(self, c: Conn, req: str, p: Params, now: float) -> Result:
        h = self._hit_row(c, p["HITId"], req)
        at = float(int(p["ExpireAt"]))
        # a HIT lives at most a year (LifetimeInSeconds' limit); an extension cannot go further either
        check_ranges(range_problem("ExpireAt", int(at), None, int(now) + YEAR))
        implicit = f"{h['id']}{int(at)}"
        if self._token_seen(c, req, "expire", implicit, now):
            raise invalid(f'The idempotency token "{implicit}" has already been processed.')
        if h["disposed"]:
            raise TurkError("InvalidHITState", "This HIT is currently in the state 'Disposed'. This operation cannot be called on a disposed HIT.")
        new = now if at <= now else at
        if at > now and h["expiration"] <= now - DISPOSE_AFTER:
            raise TurkError("HITTooOldForExtension", f"Hit {h['id']} is too old to be extended.")
        c.execute("UPDATE hits SET expiration=?, live=? WHERE id=?", (new, int(new > now), h["id"]))
        self._remember(c, req, "expire", implicit, h["id"], now)
        return {}

    def op_CreateAdditionalAssignmentsForHIT(self, c: Conn, req: str, p: Params, now: float) -> Result:
        h = self._hit_row(c, p["HITId"], req)
        n = p["NumberOfAdditionalAssignments"]
        token = p.get("UniqueRequestToken")
        seen = self._token_seen(c, req, "extend", token, now)
        if seen:
            raise invalid(f'The request with unique request token "{token}" has already been processed ({seen}).')
        if n < 1:
            check_ranges(range_problem("NumberOfAdditionalAssignments", n, 1, None))
        if h["disposed"]:
            raise TurkError("InvalidHITState", "This HIT is currently in the state 'Disposed'. This operation can be called with a status of: Assignable, Unassignable, Reviewable, Reviewing")
        old = h["max_assignments"]
        check_ranges(range_problem("NumberOfAdditionalAssignments", n, 1, 1_000_000_000 - old))
        if old < 10 <= old + n:
            raise TurkError("InvalidMaximumAssignmentsIncrease",
                            f"The HIT has {old} assignments; a HIT created with fewer than 10 assignments cannot be extended to 10 or more.")
        self._require_funds(c, req, h["unit_cost_cents"] * n, now, liability=True)
        c.execute("UPDATE hits SET max_assignments=max_assignments+? WHERE id=?", (n, h["id"]))
        self._remember(c, req, "extend", token, f"{h['id']}:{n}", now)
        return {}

    def op_DeleteHIT(self, c: Conn, req: str, p: Params, now: float) -> Result:
        h = self._hit_row(c, p["HITId"], req)
        status = self.hit_status(h, now)  # a Disposed HIT is refused like any other wrong state, as MTurk does
        if status not in ("Reviewable", "Reviewing") or h["n_submitted"] > 0:
            raise TurkError("InvalidHITState", f"This HIT is currently in the state '{status}'. "
                            "This operation can be called with a status of: Reviewing, Reviewable")
        c.execute("UPDATE hits SET disposed=1 WHERE id=?", (h["id"],))
        return {}

    def op_UpdateHITTypeOfHIT(self, c: Conn, req: str, p: Params, now: float) -> Result:
        """The HIT takes the new type's properties; work not yet paid is paid at the new type's reward."""
        h = self._hit_row(c, p["HITId"], req)
        if h["disposed"]:
            raise TurkError("InvalidHITState", "This HIT is currently in the state 'Disposed'. "
                            "This operation can be called with a status of: Assignable, Unassignable, Reviewable, Reviewing")
        t = c.execute("SELECT * FROM hit_types WHERE id=? AND requester=? AND disposed=0", (p["HITTypeId"], req)).fetchone()
        if t is None:
            raise invalid(f"Hit type {p['HITTypeId']} does not exist.")
        unit = cents(assignment_cost(dollars(t["reward_cents"]), h["max_assignments"], bool(t["masters"])))
        open_slots = h["max_assignments"] - h["n_approved"] - h["n_rejected"]
        if unit > h["unit_cost_cents"]:
            self._require_funds(c, req, (unit - h["unit_cost_cents"]) * open_slots, now, liability=True)
        c.execute("UPDATE hits SET hit_type_id=?, unit_cost_cents=? WHERE id=?", (t["id"], unit, h["id"]))
        return {}

    def op_UpdateHITReviewStatus(self, c: Conn, req: str, p: Params, now: float) -> Result:
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

