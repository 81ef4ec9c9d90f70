"""The task site's door for Prolific participants: `/prolific/...` routes mounted on the built-in
marketplace's worker site (`WorkerSite.mount`, a `SiteExtension`).

A participant comes from Prolific's study URL with `PROLIFIC_PID`, `STUDY_ID` and `SESSION_ID`. Every
request (page or JSON) goes through `ProlificGate.admit` first, so only a submission Prolific confirms
as ACTIVE, this participant's and in a study this site serves can see or submit work; the URL claims
alone open nothing. Whatever records an answer or hands out a new task is confirmed with Prolific at
that moment (a place can be returned or time out at any time), including the answer form posted to the
content origin. The admitted participant works as worker `Admission.worker_id` on HITs of the seat's
HIT type, one at a time, never a HIT they hold or answered before (the built-in marketplace's own
assignments are the record, so a crash between accepting and noting it here changes nothing) and,
with `items_of`, never a HIT sharing an item with one of those in the same stage; at most `bundle` HITs
per submission. A HIT that expired or was returned unanswered in their hands may come back to them in
the same submission: they judged nothing in it, and refusing it would let a slow crowd starve a stage's
last HITs; never in a later one (`_left_before`). An answer the HIT's task kind cannot read is refused
(`check_answer`) and the task stays open; a returned or timed-out submission's open tasks go back to
the marketplace at once (`release`). After the bundle it redirects to Prolific's completion URL with the
study's code; a participant with nothing (more) to take is asked to return the place, and a shorter
bundle's HITs are paid per HIT as a bonus (the code is only ever a whole bundle's reward).

Which assignments belong to which submission is kept here (`served`), written in the same thread that
accepted the assignment, and the answer itself carries a hidden `prolific_submission_id` field (a
reserved field the task kinds ignore), so review can decide a submission from its HITs even if this
small table were lost.

Pages follow the security model of the worker site: requester HTML is never rendered on the worker
origin. The door's page frames the HIT from the content origin (signed frame URL), whose form posts to
the content origin's `/mturk/externalSubmit` (authenticated, MTurk-style, by the unguessable assignment
id only); the door then sees the assignment submitted. The JSON API (`/prolific/api/...`, what the
simulated crowd uses) submits through the door, which adds the hidden `prolific_submission_id` field.
"""

from __future__ import annotations

import hashlib
import html
import json
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from campaign.filemodes import private_db, private_dir
from campaign.market.engine import Engine, WorkerError
from campaign.market.worker_site import Reply, SiteConfig, frame_html
from campaign.prolific.gate import Admission, ProlificGate, Refused, StudySeat, SubmissionSource, site_worker_id
from campaign.untrusted import Refused as BadInput
from campaign.untrusted import check_fields, loads_json_object

SESSION_KEYS = ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID")
SUBMISSION_FIELD = "prolific_submission_id"

LEFT = ("Abandoned", "Returned")  # a participant's assignments that were never answered

SCHEMA = """
CREATE TABLE IF NOT EXISTS seats (study_id TEXT PRIMARY KEY, hit_type_id TEXT NOT NULL, bundle INTEGER NOT NULL,
  completion_code TEXT NOT NULL, completion_url TEXT NOT NULL, stage TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS served (assignment_id TEXT PRIMARY KEY, submission_id TEXT NOT NULL,
  participant_id TEXT NOT NULL, study_id TEXT NOT NULL, hit_id TEXT NOT NULL, state TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS served_by_submission ON served (submission_id);
CREATE TABLE IF NOT EXISTS workers (worker_id TEXT PRIMARY KEY);
"""


@dataclass(frozen=True)
class Step:
    """What a participant gets next: an assignment to work on, the completion redirect, or nothing yet."""

    kind: str  # "task" | "done" | "wait" (work may come: ask again) | "return" (no work will come: give the place back)
    assignment_id: str | None = None
    hit_id: str | None = None
    redirect: str | None = None


class ProlificDoor:
    def __init__(self, engine: Engine, config: SiteConfig, state_dir: Path, gate_api: SubmissionSource, *, ttl: float = 0.0,
                 items_of: Callable[[str], frozenset[str]] | None = None,
                 check_answer: Callable[[str, list[tuple[str, str]]], None] | None = None) -> None:
        """`ttl`: how long a confirmation may be reused for requests that change nothing (0: never).
        `items_of`: HIT id -> the ids of the items it shows (trap items left out), so that a participant
        is never given an item twice in a stage; without it, only whole HITs are never repeated.
        `check_answer(hit_id, fields)`: raises `campaign.tasks.base.InvalidAnswer` for an answer that does
        not fit the HIT (`store_answer_check`: the task kind's own parser); such an answer is refused
        with a 400 the participant sees, and the task stays theirs to answer again or return."""
        private_dir(state_dir)
        self.engine = engine
        self.config = config
        self.items_of = items_of
        self.check_answer = check_answer
        self._items: dict[str, frozenset[str]] = {}
        self._db = sqlite3.connect(private_db(state_dir / "prolific-site.sqlite"), check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.executescript(SCHEMA)
        self._lock = threading.RLock()
        self.hooks: Any = None  # a `campaign.prolific.hooks.HookReceiver` once webhooks are on
        self.gate = ProlificGate(gate_api, self.seat, ttl=ttl, clock=engine.clock.now)

    def close(self) -> None:
        self._db.close()

    # -- webhooks (campaign.prolific.hooks) ----------------------------------------------------------------
    def route_with_headers(self, method: str, path: str, q: dict[str, str], body: bytes,
                           headers: dict[str, str]) -> Reply | None:
        """`POST /prolific/hooks`: Prolific's webhook deliveries, verified and only marked by `hooks`
        (a `HookReceiver`); None for every other path (the participants' routes, `route`)."""
        if path.rstrip("/") != "/prolific/hooks":
            return None
        if method != "POST" or self.hooks is None:
            return _json(404 if self.hooks is None else 405, {"error": "NotFound" if self.hooks is None else "MethodNotAllowed"})
        status, reason = self.hooks.receive(headers, body)
        return _json(status, {"status": "ok" if status < 300 else "refused", "detail": reason})

    def study_of_submission(self, submission_id: str) -> str | None:
        """The study a submission worked in here (None: it never reached the task site)."""
        with self._lock:
            row = self._db.execute("SELECT study_id FROM served WHERE submission_id=? LIMIT 1", (submission_id,)).fetchone()
        return None if row is None else str(row[0])

    # -- seats (written by the Prolific marketplace adapter) -------------------------------------------------
    def add_seat(self, seat: StudySeat, stage: str) -> None:
        with self._lock:
            self._db.execute("INSERT INTO seats VALUES (?,?,?,?,?,?) ON CONFLICT (study_id) DO UPDATE SET "
                             "hit_type_id=excluded.hit_type_id, bundle=excluded.bundle, completion_code=excluded.completion_code, "
                             "completion_url=excluded.completion_url, stage=excluded.stage",
                             (seat.study_id, seat.hit_type_id, seat.bundle, seat.completion_code, seat.completion_url, stage))

    def seat(self, study_id: str) -> StudySeat | None:
        with self._lock:
            r = self._db.execute("SELECT * FROM seats WHERE study_id=?", (study_id,)).fetchone()
        if r is None:
            return None
        return StudySeat(r["study_id"], r["hit_type_id"], r["bundle"], r["completion_code"], r["completion_url"])

    def assignments_of(self, submission_id: str) -> list[str]:
        """The assignments a submission submitted, in the order they were served."""
        with self._lock:
            rows = self._db.execute("SELECT assignment_id FROM served WHERE submission_id=? AND state='submitted' "
                                    "ORDER BY rowid", (submission_id,)).fetchall()
        return [r[0] for r in rows]

    def submission_of(self, assignment_id: str) -> tuple[str, str] | None:
        """(submission id, study id) of an assignment served through the door."""
        with self._lock:
            r = self._db.execute("SELECT submission_id, study_id FROM served WHERE assignment_id=?", (assignment_id,)).fetchone()
        return (r[0], r[1]) if r else None

    def served_counts(self, study_id: str) -> dict[str, tuple[int, int]]:
        """Per submission of the study: (assignments submitted, assignments open) through the door."""
        with self._lock:
            rows = self._db.execute("SELECT submission_id, SUM(state='submitted'), SUM(state='open') FROM served "
                                    "WHERE study_id=? GROUP BY submission_id", (study_id,)).fetchall()
        return {r[0]: (int(r[1] or 0), int(r[2] or 0)) for r in rows}

    def submissions(self) -> list[tuple[str, str]]:
        """Every (submission id, study id) that submitted work here."""
        with self._lock:
            rows = self._db.execute("SELECT DISTINCT submission_id, study_id FROM served WHERE state='submitted'").fetchall()
        return [(r[0], r[1]) for r in rows]

    def could_serve(self, study_id: str, participant_ids: Iterable[str]) -> bool:
        """Whether a free HIT of the study's type could be given to one of these participants (the
        people who took part in the study so far): not a HIT they were given, nor one sharing an item
        with one they were given in the stage. A participant the site has never seen could take any."""
        seat = self.seat(study_id)
        if seat is None:
            return True
        with self._lock:
            types = self._stage_types(study_id)
            for pid in participant_ids:
                wid = site_worker_id(pid)
                if not self._db.execute("SELECT 1 FROM workers WHERE worker_id=?", (wid,)).fetchone():
                    return True
                given, seen = self._taken(self._worked(wid), pid, "", types)
                for h in self.engine.worker("available", wid, 1000):
                    if h["HITTypeId"] != seat.hit_type_id or h["HITId"] in given:
                        continue
                    items = self._items_in(h["HITId"])
                    if self.items_of is None or not items or not (items & seen):
                        return True
        return False

    def release(self, submission_id: str) -> list[str]:
        """Give back to the marketplace the tasks a submission still holds, once Prolific says it was
        returned or timed out (the caller knows: `ProlificMarketplace.settle`). The person has left and
        can answer nothing more (the gate refuses them), but the marketplace would keep their task
        Accepted until its own deadline, and nobody else could take that slot meanwhile. Returns the
        assignments given back."""
        out = []
        with self._lock:
            rows = self._db.execute("SELECT assignment_id FROM served WHERE submission_id=? AND state='open'",
                                    (submission_id,)).fetchall()
            for (aid,) in rows:
                status = self._engine_status(aid)
                if status == "Accepted":
                    try:
                        self.engine.worker("return", aid)
                        out.append(aid)
                    except WorkerError:
                        status = self._engine_status(aid)  # answered or taken back meanwhile: as it now is
                state = "submitted" if status in ("Submitted", "Approved", "Rejected") else "lost"
                self._db.execute("UPDATE served SET state=? WHERE assignment_id=?", (state, aid))
        return out

    def _taken(self, worked: list[tuple[str, str, str, str]], participant_id: str, submission_id: str,
               types: set[str]) -> tuple[set[str], set[str]]:
        """What a participant may not be given (for `submission_id`, "" for any new one): the HITs they hold
        or answered (`worked`, their worker's assignments) or were given in another submission
        (`_left_before`), and the items they were shown in the stage (`types`: its HIT types)."""
        given = {w[0] for w in worked if w[2] not in LEFT} | self._left_before(participant_id, submission_id)
        seen: set[str] = set()
        for hit_id, _, status, type_id in worked:
            if type_id in types and status not in LEFT:
                seen |= self._items_in(hit_id)
        return given, seen

    def _left_before(self, participant_id: str, submission_id: str) -> set[str]:
        """HITs this participant was given in another submission of theirs (one they returned, or that
        timed out, or completed): never given to them again. Within one submission a task that expired
        in their hands may come back (they judged nothing in it); but a participant who left with it, or
        whose answer to it was refused, and who takes the study again, would otherwise get the same task
        each time, hold it until it is taken back and keep everyone else from its slot."""
        rows = self._db.execute("SELECT DISTINCT hit_id FROM served WHERE participant_id=? AND submission_id<>?",
                                (participant_id, submission_id)).fetchall()
        return {str(r[0]) for r in rows}

    # -- the participant's way through a bundle ------------------------------------------------------------------
    def _register(self, adm: Admission) -> None:
        wid = adm.worker_id
        if self._db.execute("SELECT 1 FROM workers WHERE worker_id=?", (wid,)).fetchone():
            return
        self.engine.worker("register", {"WorkerId": wid, "Locale": {"Country": "GB"}})
        self._db.execute("INSERT OR IGNORE INTO workers VALUES (?)", (wid,))

    def _engine_status(self, assignment_id: str) -> str | None:
        try:
            self.engine.worker("task", assignment_id)
            return "Accepted"
        except WorkerError as exc:
            if exc.code != "AssignmentNotActive":
                return None
        with self.engine.db.read() as c:
            row = c.execute("SELECT status FROM assignments WHERE id=?", (assignment_id,)).fetchone()
        if row is not None and row[0] == "Accepted":
            # Past its deadline: the marketplace's sweep that abandons it was rolled back with the refused call.
            return "Abandoned"
        return str(row[0]) if row else None

    def _worked(self, worker_id: str) -> list[tuple[str, str, str, str]]:
        """Every assignment the marketplace ever gave this worker: (HIT, assignment, status, HIT type)."""
        with self.engine.db.read() as c:
            rows = c.execute("SELECT a.hit_id, a.id, a.status, h.hit_type_id FROM assignments a JOIN hits h ON h.id=a.hit_id "
                             "WHERE a.worker_id=? ORDER BY a.seq", (worker_id,)).fetchall()
        return [(str(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]

    def _items_in(self, hit_id: str) -> frozenset[str]:
        """The HIT's items; remembered once known (they never change), asked again while unknown."""
        if self.items_of is None:
            return frozenset()
        if hit_id not in self._items:
            items = frozenset(self.items_of(hit_id))
            if not items:
                return items
            self._items[hit_id] = items
        return self._items[hit_id]

    def _stage_types(self, study_id: str) -> set[str]:
        """The HIT types of every study of this study's stage: items are compared within the stage."""
        rows = self._db.execute("SELECT hit_type_id FROM seats WHERE stage=(SELECT stage FROM seats WHERE study_id=?)",
                                (study_id,)).fetchall()
        return {str(r[0]) for r in rows}

    def _adopt(self, adm: Admission, worked: list[tuple[str, str, str, str]]) -> None:
        """An open assignment of this seat's type the door has no note of (the process died between the
        marketplace's accept and the note): it is this participant's, so it joins this submission."""
        for hit_id, aid, status, type_id in worked:
            if status == "Accepted" and type_id == adm.seat.hit_type_id and self.submission_of(aid) is None:
                self._db.execute("INSERT OR IGNORE INTO served VALUES (?,?,?,?,?,?)",
                                 (aid, adm.submission_id, adm.participant_id, adm.seat.study_id, hit_id, "open"))

    def next_step(self, adm: Admission, *, confirmed: bool = False) -> Step:
        """The open assignment of this submission, else a new one of the seat's HIT type, else the redirect.
        A new task is handed out only on a confirmation made now (`confirmed`, or asked here)."""
        with self._lock:
            self._register(adm)
            sub = adm.submission_id
            worked = self._worked(adm.worker_id)
            self._adopt(adm, worked)
            for r in self._db.execute("SELECT assignment_id, hit_id FROM served WHERE submission_id=? AND state='open'",
                                      (sub,)).fetchall():
                status = self._engine_status(r["assignment_id"])
                if status == "Accepted":
                    return Step("task", r["assignment_id"], r["hit_id"])
                # submitted from the content origin's form, or expired/returned meanwhile (no longer counts)
                state = "submitted" if status in ("Submitted", "Approved", "Rejected") else "lost"
                self._db.execute("UPDATE served SET state=? WHERE assignment_id=?", (state, r["assignment_id"]))
            done = self._db.execute("SELECT COUNT(*) FROM served WHERE submission_id=? AND state='submitted'",
                                    (sub,)).fetchone()[0]
            if done >= adm.seat.bundle:
                return Step("done", redirect=adm.seat.redirect())
            available = self.engine.worker("available", adm.worker_id, 1000)  # also commits a due expiry sweep
            worked = self._worked(adm.worker_id)  # so read again: an expired slot now reads Abandoned
            given, seen = self._taken(worked, adm.participant_id, sub, self._stage_types(adm.seat.study_id))
            unknown = False  # a free HIT whose items the daemon has not recorded yet: it may become servable
            for h in spread(available, adm.participant_id):
                if h["HITTypeId"] != adm.seat.hit_type_id or h["HITId"] in given:
                    continue
                items = self._items_in(h["HITId"])
                if self.items_of is not None and (not items or items & seen):
                    unknown = unknown or not items
                    continue  # an item already given in this stage, or items not known yet (not recorded by the daemon)
                if not confirmed:
                    self.gate.confirm(adm)
                    confirmed = True
                try:
                    acc = self.engine.worker("accept", adm.worker_id, h["HITId"])
                except WorkerError:
                    continue  # taken meanwhile, or this worker may not: try the next
                self._db.execute("INSERT INTO served VALUES (?,?,?,?,?,?)", (acc["AssignmentId"], sub, adm.participant_id,
                                                                               adm.seat.study_id, h["HITId"], "open"))
                return Step("task", acc["AssignmentId"], h["HITId"])
            # Nothing (more) this participant may take: waiting would hold a place that someone else could
            # use (for as long as the study's maximum time), so they are asked to give it back, unless a free
            # HIT is only waiting for the daemon to record what it shows. A shorter bundle is not completed:
            # the completion code is a whole bundle's reward, so the HITs done are paid per HIT, as a bonus
            # to the returned submission (`ProlificMarketplace.pay_work`).
            return Step("wait") if unknown else Step("return")

    def _open_row(self, adm: Admission, assignment_id: str) -> sqlite3.Row:
        r = self._db.execute("SELECT submission_id, state FROM served WHERE assignment_id=?", (assignment_id,)).fetchone()
        if r is None or r["submission_id"] != adm.submission_id:
            raise WorkerError("NotYourAssignment", "This task was not given to this Prolific session.", 403)
        if r["state"] != "open":
            raise WorkerError("AssignmentNotActive", "This task was already submitted or has expired.", 409)
        return r

    def submit(self, adm: Admission, assignment_id: str, fields: list[tuple[str, str]], *, confirmed: bool = False) -> Step:
        """Record one answer of this submission; the session is confirmed with Prolific first unless the
        caller just did (`confirmed`): a returned or timed-out place records nothing."""
        with self._lock:
            self._open_row(adm, assignment_id)
            if not confirmed:
                adm = self.gate.confirm(adm)
            self._engine_submit(adm.submission_id, assignment_id, fields)
            return self.next_step(adm, confirmed=True)

    def _engine_submit(self, submission_id: str, assignment_id: str, fields: list[tuple[str, str]]) -> dict[str, Any]:
        clean = [(k, v) for k, v in fields if k not in (SUBMISSION_FIELD, "assignmentId", *SESSION_KEYS)]
        self._check(assignment_id, clean)
        out = self.engine.worker("submit", assignment_id, [("assignmentId", assignment_id), *clean,
                                                           (SUBMISSION_FIELD, submission_id)])
        self._db.execute("UPDATE served SET state='submitted' WHERE assignment_id=?", (assignment_id,))
        return dict(out)

    def _check(self, assignment_id: str, fields: list[tuple[str, str]]) -> None:
        """Refuse (400, nothing recorded) an answer the HIT's task kind cannot read: stored, it would take
        one of the HIT's slots for good (the marketplace counts it as the HIT's answer) and be rejected,
        and the whole bundle with it. Refused here, the task stays open: the participant can answer it
        properly, or return it and it goes to someone else. A check that fails for another reason (a
        failure of ours, not the answer's) refuses nothing: collect judges the answer as it would
        any other."""
        if self.check_answer is None:
            return
        r = self._db.execute("SELECT hit_id FROM served WHERE assignment_id=?", (assignment_id,)).fetchone()
        if r is None:
            return
        try:
            self.check_answer(str(r[0]), fields)
        except ValueError as exc:  # InvalidAnswer (a ValueError): the answer does not fit the HIT
            raise WorkerError("InvalidAnswer", f"Your answer was not recorded: {str(exc)[:300]}", 400) from None
        except Exception:  # noqa: BLE001 - ours, not the participant's: recorded, and judged by collect as usual
            return

    # -- the content origin's form (`/mturk/externalSubmit`) and frames ----------------------------------------
    def _served_admission(self, assignment_id: str, *, fresh: bool) -> Admission | None:
        """The admission behind an assignment the door served (None: not the door's), confirmed as asked."""
        with self._lock:
            r = self._db.execute("SELECT * FROM served WHERE assignment_id=?", (assignment_id,)).fetchone()
        if r is None:
            return None
        try:
            return self.gate.admit(r["participant_id"], r["study_id"], r["submission_id"], fresh=fresh)
        except Refused as exc:
            raise WorkerError("NotAdmitted", str(exc), 403) from None

    def external_submit(self, assignment_id: str, fields: list[tuple[str, str]]) -> dict[str, Any] | None:
        """The answer form of a HIT the door served, posted to the content origin: recorded only while the
        Prolific submission is still ACTIVE (asked now), with the submission's hidden field. None for an
        assignment the door did not serve (the content origin handles it as before)."""
        with self._lock:
            adm = self._served_admission(assignment_id, fresh=True)
            if adm is None:
                return None
            self._open_row(adm, assignment_id)
            return self._engine_submit(adm.submission_id, assignment_id, fields)

    def serves(self, assignment_id: str) -> bool:
        return self.submission_of(assignment_id) is not None

    def check_frame(self, assignment_id: str) -> None:
        """A frame of a HIT the door served is shown only while its submission may still work."""
        self._served_admission(assignment_id, fresh=False)

    # -- HTTP -------------------------------------------------------------------------------------------------
    def route(self, method: str, path: str, q: dict[str, str], body: bytes) -> Reply | None:
        """Every call names its Prolific session and is admitted by the gate first; a submit is confirmed
        with Prolific at that moment, reads may reuse a recent confirmation (see `ProlificGate`)."""
        api = path.startswith("/prolific/api/")
        try:
            data = _json_body(body) if api and method == "POST" else dict(q)
            if api and method == "POST" and path == "/prolific/api/submit":
                fields = submitted_fields(data.get("fields"))  # refused before anything is asked or changed
                adm = self._admit(data, fresh=True)
                step = self.submit(adm, str(data.get("assignmentId", "")), fields, confirmed=True)
                return _json(200, self._step_out(adm, step))
            adm = self._admit(data, fresh=False)
            asked = self.gate.ttl <= 0  # without a memory of confirmations, the admission just asked Prolific
            if api and method == "GET" and path == "/prolific/api/next":
                return _json(200, self._step_out(adm, self.next_step(adm, confirmed=asked)))
            if api and method == "GET" and path == "/prolific/api/task":
                aid = str(data.get("assignmentId", ""))
                with self._lock:
                    self._open_row(adm, aid)
                a, h = self.engine.worker("task", aid)
                text = frame_html(h["question"], h["id"], a["id"], a["worker_id"], self.config.content_origin)
                return Reply(200, "text/plain; charset=utf-8", text.encode("utf-8"),
                             {"Content-Security-Policy": "sandbox; default-src 'none'", "Cache-Control": "no-store"})
            if not api and method == "GET" and path == "/prolific/start":
                session = urllib.parse.urlencode({k: q.get(k, "") for k in SESSION_KEYS})
                return self._page_for(adm, self.next_step(adm, confirmed=asked), session)
            raise WorkerError("NotFound", "No such page.", 404)
        except Refused as exc:
            return _refusal(api, 403, "NotAdmitted", str(exc))
        except WorkerError as exc:
            return _refusal(api, exc.status, exc.code, exc.message)

    def _admit(self, d: dict[str, Any], *, fresh: bool) -> Admission:
        return self.gate.admit(*(str(d.get(k, "") or "") for k in SESSION_KEYS), fresh=fresh)

    @staticmethod
    def _step_out(adm: Admission, step: Step) -> dict[str, Any]:
        out: dict[str, Any] = {"status": step.kind, "bundle": adm.seat.bundle}
        if step.kind == "task":
            out.update({"AssignmentId": step.assignment_id, "HITId": step.hit_id})
        if step.redirect:
            out["redirect"] = step.redirect
        return out

    def _page_for(self, adm: Admission, step: Step, session: str) -> Reply:
        if step.kind == "done" and step.redirect:
            return Reply(303, "text/plain; charset=utf-8", b"", {"Location": step.redirect, "Cache-Control": "no-store"})
        if step.kind == "task" and step.assignment_id and step.hit_id:
            src = self.config.frame_src(step.hit_id, step.assignment_id, adm.worker_id)
            body = (f'<p>Task {html.escape(str(self._done_count(adm) + 1))} of {adm.seat.bundle}. Submit the form below, '
                    f'then <a href="/prolific/start?{html.escape(session)}">continue</a>.</p>'
                    f'<iframe src="{html.escape(src)}" width="100%" height="800" sandbox="allow-scripts allow-forms"></iframe>')
            return _html(200, _page("Your task", body), self.config.content_origin)
        done = self._done_count(adm)
        text = ("<p>There is no task for you right now. Please return this study on Prolific so that your place "
                "goes to someone else.</p>")
        if done:
            text += (f"<p>You completed {html.escape(str(done))} of {html.escape(str(adm.seat.bundle))} tasks: each task you "
                     "completed and that was accepted is paid as a bonus on Prolific, in proportion to the study's "
                     "reward, after you return the study.</p>")
        return _html(200, _page("No task available", text), self.config.content_origin)

    def _done_count(self, adm: Admission) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM served WHERE submission_id=? AND state='submitted'",
                                        (adm.submission_id,)).fetchone()[0])


def spread(available: list[dict[str, Any]], participant_id: str) -> list[dict[str, Any]]:
    """The free HITs in the order a participant is offered them: the least taken first (most slots still
    free), ties in an order of this participant's own (a hash of participant and HIT, the same on every
    call and every restart).

    Handed out oldest first, a bundle's HITs would go together: participants arriving one after another
    would each take the same few HITs, and every HIT of a bundle would be done by the same five people.
    Then one bad group leaves many items with one usable rating, and quality control, which compares
    each worker with the others on the same items, sees the one careful worker of that group as the
    outlier. Spread out, each HIT is done by a different mix of people, each worker shares items with
    many others, and bad work thins out over all items instead of ruining some. (In `campaign bench
    hostile`, seed 1, the five participants of Likert HITs 5-9 were one adversary answering blank
    (rejected), one answering at random and two spammers (excluded) and one careful worker, whose
    agreement with the rest was r=-0.04: those 25 items had one rating each, and Pearson fell to 0.90
    against 0.95 without adversaries. docs/hostile-crowd.md has the figures since.)"""
    def key(h: dict[str, Any]) -> tuple[int, str]:
        free = h.get("NumberOfAssignmentsAvailable")
        tie = hashlib.sha256(f"{participant_id}\x1f{h.get('HITId', '')}".encode()).hexdigest()
        return (-int(free) if isinstance(free, int) else 0, tie)
    return sorted(available, key=key)


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title></head>"
            f"<body><h1>{html.escape(title)}</h1>{body}</body></html>")


def _html(status: int, text: str, content_origin: str, headers: dict[str, str] | None = None) -> Reply:
    csp = (f"default-src 'none'; frame-src {content_origin}; form-action 'none'; frame-ancestors 'none'; "
           "base-uri 'none'")
    return Reply(status, "text/html; charset=utf-8", text.encode("utf-8"),
                 {"Content-Security-Policy": csp, "X-Frame-Options": "DENY", "Cache-Control": "no-store", **(headers or {})})


def _json(status: int, obj: Any, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, "application/json", json.dumps(obj).encode("utf-8"), {"Cache-Control": "no-store", **(headers or {})})


def _refusal(api: bool, status: int, code: str, message: str) -> Reply:
    if api:
        return _json(status, {"error": code, "message": message}, {"X-Error-Code": code})
    return _html(status, _page("Not available", f"<p>{html.escape(message)}</p>"), "'none'", {"X-Error-Code": code})


def _json_body(body: bytes) -> dict[str, Any]:
    """The JSON API's body under `campaign.untrusted`'s rules (UTF-8, bounded depth, finite numbers, no
    lone surrogate), or a 400."""
    try:
        return loads_json_object(body)
    except BadInput as exc:
        raise WorkerError("MalformedRequest", f"The request was not read: {exc}", 400) from None


def submitted_fields(raw: Any) -> list[tuple[str, str]]:
    """`fields` of `/prolific/api/submit`: a list of [name, value] string pairs (absent: none), each
    name and value passing `campaign.untrusted.check_fields`; anything else is a 400 the participant sees."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
                                            for p in raw):
        raise WorkerError("MalformedRequest", "fields must be a list of [name, value] pairs of strings.", 400)
    try:
        return check_fields((k, v) for k, v in raw)
    except BadInput as exc:
        raise WorkerError("InvalidInput", f"Your answer was not recorded: {exc}", 400) from None
