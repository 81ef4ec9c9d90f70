"""The worker side: registration, the HITs a worker may discover, preview, accept, submit and return.

Called through `Engine.worker(name, ...)` by the worker site; refusals are `WorkerError`s, not MTurk errors.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from campaign.answer_xml import build_answer_xml
from campaign.market import quals as Q
from campaign.market.engine.base import Conn, EngineBase, TurkError, WorkerError, dollars, new_id
from campaign.money import fmt
from campaign.untrusted import check_fields


class WorkerSide(EngineBase):
    # -- worker side ----------------------------------------------------------------------------------
    def w_register(self, c: Conn, now: float, profile: dict[str, Any]) -> dict[str, Any]:
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

    def w_known(self, c: Conn, now: float, wid: str) -> bool:
        """Whether `wid` is a registered worker (the operator's `worker revoke` names one)."""
        return c.execute("SELECT 1 FROM workers WHERE id=?", (wid,)).fetchone() is not None

    def _worker(self, c: Conn, wid: str) -> sqlite3.Row:
        w = c.execute("SELECT * FROM workers WHERE id=?", (wid,)).fetchone()
        if w is None:
            raise WorkerError("UnknownWorker", f"Worker {wid} is not registered; POST /worker/api/register first.", 404)
        return w

    def _values(self, c: Conn, w: sqlite3.Row) -> dict[str, Any]:
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

    def _auto_grant(self, c: Conn, w: sqlite3.Row, reqs: list[dict], values: dict[str, Any], now: float) -> None:
        for r in reqs:
            qid = r["QualificationTypeId"]
            if qid in values or qid in Q.SYSTEM_IDS:
                continue
            qt = c.execute("SELECT auto_granted, auto_value FROM qual_types WHERE id=?", (qid,)).fetchone()
            if qt is not None and qt["auto_granted"]:
                values[qid] = qt["auto_value"]

    def _blocked(self, c: Conn, requester: str, wid: str) -> bool:
        return c.execute("SELECT 1 FROM blocks WHERE requester=? AND worker_id=?", (requester, wid)).fetchone() is not None

    def w_available(self, c: Conn, now: float, wid: str, limit: int) -> list[dict[str, Any]]:
        """The first `limit` HITs this worker may discover, oldest first.

        Walks the partial index of HITs with a free slot (`hits_assignable`, schema version 3) and stops
        at `limit`, so a call costs what it returns (plus what the worker may not see), not the size of
        the HITs table.
        """
        w = self._worker(c, wid)
        values = self._values(c, w)
        blocked_by = {r[0] for r in c.execute("SELECT requester FROM blocks WHERE worker_id=?", (wid,))}
        cur = c.cursor()
        cur.row_factory = None  # plain tuples: a name lookup on sqlite3.Row scans the columns, 16 times a row here
        cur.execute(
            "SELECT h.id, h.hit_type_id, h.requester, h.expiration, h.creation, h.max_assignments, h.n_accepted, "
            "h.n_submitted, h.n_approved, h.n_rejected, t.title, t.description, t.reward_cents, t.duration, t.keywords, t.quals "
            "FROM hits h INDEXED BY hits_assignable JOIN hit_types t ON t.id=h.hit_type_id "
            "WHERE h.assignable=1 AND h.expiration>? "
            "AND h.id NOT IN (SELECT hit_id FROM assignments WHERE worker_id=? AND status IN ('Accepted','Submitted','Approved','Rejected')) "
            "ORDER BY h.seq", (now, wid))
        out: list[dict[str, Any]] = []
        verdicts: dict[str, bool] = {}  # per HIT type: may this worker discover it?
        rewards: dict[int, str] = {}
        for (hit_id, type_id, requester, expiration, creation, max_assignments, n_accepted, n_submitted, n_approved,
             n_rejected, title, description, reward_cents, duration, keywords, quals) in cur:
            if requester in blocked_by:
                continue
            ok = verdicts.get(type_id)
            if ok is None:
                reqs = json.loads(quals)
                ok = True
                if reqs:
                    vals = dict(values)
                    self._auto_grant(c, w, reqs, vals, now)
                    ok = Q.allowed(reqs, vals, "discover")
                verdicts[type_id] = ok
            if not ok:
                continue
            reward = rewards.get(reward_cents)
            if reward is None:
                reward = rewards[reward_cents] = fmt(dollars(reward_cents))
            out.append({"HITId": hit_id, "HITTypeId": type_id, "Title": title, "Description": description,
                        "Reward": reward, "Keywords": keywords or "", "AssignmentDurationInSeconds": duration,
                        "Expiration": expiration,
                        "NumberOfAssignmentsAvailable": max_assignments - n_accepted - n_submitted - n_approved - n_rejected,
                        "CreationTime": creation})
            if len(out) >= limit:
                break
        cur.close()
        return out

    def _live_hit(self, c: Conn, hit_id: str) -> sqlite3.Row:
        """The HIT as a worker may see it: a missing or disposed HIT is the same 404 to them."""
        try:
            h = self._hit_row(c, hit_id)
        except TurkError:
            h = None
        if h is None or h["disposed"]:
            raise WorkerError("HITNotFound", f"HIT {hit_id} does not exist.", 404)
        return h

    def w_preview(self, c: Conn, now: float, hit_id: str, wid: str | None) -> sqlite3.Row:
        """The HIT, if `wid` may see its content. A HIT with no requirement guarding Preview may be
        previewed by anyone (as on MTurk); a guarded one only by a known worker who meets them."""
        h = self._live_hit(c, hit_id)
        reqs = json.loads(h["quals"])
        if reqs and any("preview" in Q.guarded(r) for r in reqs):
            if not wid:
                raise WorkerError("NotSignedIn", "Sign in to preview this HIT: it is open only to qualified workers.", 401)
            w = c.execute("SELECT * FROM workers WHERE id=?", (wid,)).fetchone()
            ok = w is not None
            if w is not None:
                vals = self._values(c, w)
                self._auto_grant(c, w, reqs, vals, now)
                ok = Q.allowed(reqs, vals, "preview")
            if not ok:
                raise WorkerError("DoesNotMeetRequirements", "You do not meet the qualification requirements to preview this HIT.", 403)
        return h

    def w_accept(self, c: Conn, now: float, wid: str, hit_id: str) -> dict[str, Any]:
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
        aid = new_id(scope=f"assignment:{hit_id}")
        deadline = now + h["duration"]
        c.execute("INSERT INTO assignments (id, hit_id, worker_id, status, accept_time, deadline) VALUES (?,?,?,?,?,?)",
                  (aid, hit_id, wid, "Accepted", now, deadline))
        c.execute("UPDATE hits SET n_accepted=n_accepted+1 WHERE id=?", (hit_id,))
        return {"AssignmentId": aid, "Deadline": deadline, "HITId": hit_id}

    def _active(self, c: Conn, aid: str, now: float, wid: str | None = None) -> tuple[sqlite3.Row, sqlite3.Row]:
        """The open assignment and its HIT. With `wid`, someone else's assignment is refused exactly as an
        unknown one is (ownership is checked before status, so its status does not leak)."""
        if aid == "ASSIGNMENT_ID_NOT_AVAILABLE":
            raise WorkerError("Preview", "This HIT is being previewed; accept it before submitting.", 400)
        a = c.execute("SELECT * FROM assignments WHERE id=?", (aid,)).fetchone()
        if a is None or (wid is not None and a["worker_id"] != wid):
            raise WorkerError("AssignmentNotFound", f"Assignment {aid} does not exist.", 404)
        if a["status"] != "Accepted":
            raise WorkerError("AssignmentNotActive", f"Assignment {aid} is {a['status']}, not open for work.", 409)
        return a, self._hit_row(c, a["hit_id"])

    def w_task(self, c: Conn, now: float, aid: str, wid: str | None = None) -> tuple[sqlite3.Row, sqlite3.Row]:
        return self._active(c, aid, now, wid)

    def w_submit(self, c: Conn, now: float, aid: str, fields: list[tuple[str, str]], wid: str | None = None) -> dict[str, Any]:
        a, h = self._active(c, aid, now, wid)
        try:  # the doors refuse such text first, with the same rule; this is the last line before the store
            xml = build_answer_xml(check_fields(fields))
        except ValueError as exc:  # Refused, UnwritableAnswer: the text says which field and character
            raise WorkerError("InvalidInput", str(exc), 400) from None
        self._move(c, aid, a["hit_id"], "Accepted", "Submitted", submit_time=now, answer=xml,
                   auto_approval_time=now + h["auto_approval"])
        return {"AssignmentId": aid, "HITId": a["hit_id"]}

    def w_return(self, c: Conn, now: float, aid: str, wid: str | None = None) -> dict[str, Any]:
        a, _ = self._active(c, aid, now, wid)
        self._move(c, aid, a["hit_id"], "Accepted", "Returned")
        return {"AssignmentId": aid}


