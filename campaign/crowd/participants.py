"""The simulated crowd as Prolific participants: each simulated worker is a participant of the emulator
who finds a study, starts it, lands on the task site, does the bundle of HITs the door hands out, and
comes back to Prolific through the completion redirect, as a person in a browser does.

The answers come from the same `Answerer` as the worker-site crowd (`campaign.crowd.runner`), seeded by
(worker, shown content): participants answer by the same rules as the worker-site crowd.
Who leaves is seeded too: per (worker, how many studies this worker started before) a small share
returns the place right after starting and a small share starts and never comes back (the emulator
times them out after the study's maximum time).

Identity is stable: each worker is registered under the external id `sim:[<namespace>:]<worker id>`,
so a restarted crowd over the same emulator state gets the same participants back (with fresh secrets)
and goes on with the submissions they had started (the task site keeps which HITs each submission
holds).

One thread walks the participants in a seeded order; which participant takes which place still
depends on when the daemon posts HITs and opens places, so runs are deterministic only as far as that
timing allows. Idle passes back off (poll, doubling up to `max_idle`), so an idle crowd is not a busy
loop.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from campaign.clock import Clock
from campaign.crowd.adversary_door import DoorAdversaries
from campaign.crowd.forms import Form, parse_form
from campaign.crowd.models import SimWorker
from campaign.crowd.runner import Answerer, CrowdStats
from campaign.prolific.emulator.participant import Participant, ParticipantError, add_participant
from campaign.prolific.gate import site_worker_id
from campaign.rng import rng_for, stable_seed
from campaign.web.loopback import open_url

log = logging.getLogger(__name__)

RETURN_SHARE = 0.03  # start a study, then return the place before doing any of it
ABANDON_SHARE = 0.02  # start a study and never come back (the emulator times the place out)
SESSION_KEYS = ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID")
SENT_BACK_AWAY = 3600.0  # simulated seconds a participant sent back with no task waits before taking that study again
EXTERNAL_PREFIX = "sim:"


@dataclass
class ParticipantStats(CrowdStats):
    """`accepted`/`submitted` count HITs (as for the worker-site crowd); the rest count places."""

    started: int = 0  # places taken (submissions started)
    completed: int = 0  # submissions finished through the completion redirect
    abandoned: int = 0
    waits: int = 0  # times the site had no HIT yet for a started submission
    resumed: int = 0  # started submissions found again at start (a restarted crowd goes on with them)
    by_participant: dict[str, int] = field(default_factory=dict)  # participant id -> HITs submitted


class SiteError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code = status, code


@dataclass
class _Session:
    """A started submission this crowd is still working on."""

    study_id: str
    submission_id: str
    query: dict[str, str]
    next_try: float = 0.0  # simulated time of the next attempt after a `wait`
    waits: int = 0
    done: int = 0  # HITs this crowd submitted in it (since it started or resumed it)


class ParticipantCrowd:
    def __init__(self, emulator_root_url: str, operator_token: str, site_url: str, workers: Sequence[SimWorker],
                 truth_by_text: Mapping[str, float], seed: int, clock: Clock, poll: float = 0.05,
                 *, namespace: str = "", wants: Callable[[dict[str, Any]], bool] | None = None, max_idle: float = 0.5,
                 max_waits: int = 20, return_share: float = RETURN_SHARE, abandon_share: float = ABANDON_SHARE,
                 adversaries: Mapping[str, str] | None = None) -> None:
        """`adversaries`: worker id -> behaviour (`campaign.crowd.adversaries.assign`) of the participants
        who misbehave (`campaign.crowd.adversary_door`)."""
        self.root = emulator_root_url.rstrip("/")
        self._token = operator_token
        self.site = site_url.rstrip("/")
        self.workers = list(workers)
        self.by_id = {w.worker_id: w for w in self.workers}
        self.answerer = Answerer(truth_by_text)
        self.adversaries = DoorAdversaries(dict(adversaries or {}), self.answerer.answer, seed)
        self.seed = seed
        self.clock = clock
        self.poll = poll
        # Two crowds on one emulator (two campaigns) with the same worker ids need different namespaces:
        # registering a participant again resets its secret, which would lock the other crowd out.
        self.namespace = namespace
        self.wants = wants  # which open studies (the participant's study listing rows) this crowd takes
        self.max_idle = max(max_idle, poll)
        self.max_waits = max_waits  # `wait` answers before a participant with no HIT done gives the place back
        self.return_share = return_share
        self.abandon_share = abandon_share
        self.stats = ParticipantStats()
        self.participants: dict[str, Participant] = {}  # sim worker id -> emulator participant
        self.on_error: Callable[[Exception], None] | None = None
        self._order = sorted(self.workers, key=lambda w: stable_seed(seed, "participant-order", w.worker_id))
        self._sessions: dict[str, _Session] = {}  # sim worker id -> the submission being worked on
        self._taken: dict[str, int] = {}  # sim worker id -> studies started so far
        # (worker, study) -> simulated time before which a participant the site sent back (no task for
        # them) does not take that study again: a person told there is nothing for them looks again later,
        # not at once (an immediate retake would only be returned again, round after round)
        self._away: dict[tuple[str, str], float] = {}
        self._stop = threading.Event()
        self._life = threading.Lock()
        self._thread: threading.Thread | None = None
        self._start_time: float | None = None

    def __repr__(self) -> str:
        return f"ParticipantCrowd({len(self.workers)} workers, site={self.site})"  # never the token

    # -- life cycle -----------------------------------------------------------------------------------------
    def register(self) -> None:
        """Every worker as a participant; the same worker finds the same participant again, and picks up
        a submission it had started (before a restart) where the task site left it."""
        for w in self.workers:
            p = add_participant(self.root, self._token, external_id=self.external_id(w.worker_id), country=w.locale,
                                approval_rate=w.approval_rate, approvals=w.approved_hits, languages=["English"])
            self.participants[w.worker_id] = p
            mine = p.submissions()
            self._taken[w.worker_id] = len(mine)
            for n, s in enumerate(mine):
                if s.get("status") != "ACTIVE" or w.worker_id in self._sessions:
                    continue
                fate = self._fate(w, n)
                if fate == "abandon":
                    continue  # still gone
                sub, study = str(s["id"]), str(s["study_id"])
                if fate == "return":  # stopped between starting and returning it
                    p.give_back(sub)
                    continue
                self._sessions[w.worker_id] = _Session(study, sub, {"PROLIFIC_PID": p.id, "STUDY_ID": study, "SESSION_ID": sub})
                self.stats.resumed += 1

    def prepare(self) -> None:
        """Sign the participants up and start the arrivals' clock; `start` then works on a thread, or a
        virtual-time run's timeline calls `step` whenever `next_due` says."""
        self.register()
        self._start_time = self.clock.now()

    def next_due(self) -> float:
        """The simulated time at which this crowd next acts unprompted: an arrival, or a participant
        trying again after the site said `wait` (infinity when neither is ahead)."""
        start = self._start_time if self._start_time is not None else self.clock.now()
        times = [start + w.arrival for w in self.workers if not self.arrived(w)]
        times += [s.next_try for s in self._sessions.values() if s.next_try > self.clock.now()]
        times += [t for t in self._away.values() if t > self.clock.now()]
        return min(times, default=math.inf)

    def start(self) -> None:
        with self._life:
            if self._thread is not None:
                return
            self.prepare()
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="participant-crowd", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Safe from any thread and more than once; returns after the crowd's thread has ended."""
        self._stop.set()
        with self._life:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)

    def external_id(self, sim_worker_id: str) -> str:
        """The operator's name for this worker on the emulator: the key of its stable identity."""
        return EXTERNAL_PREFIX + (f"{self.namespace}:" if self.namespace else "") + sim_worker_id

    def task_site_worker_id(self, sim_worker_id: str) -> str:
        """The worker id this person has on the task site (what the door and the gate call them)."""
        return site_worker_id(self.participants[sim_worker_id].id)

    def _loop(self) -> None:
        idle = self.poll
        while not self._stop.is_set():
            try:
                worked = self.step()
            except Exception as exc:  # the crowd must not die silently; report and keep going
                worked = 0
                self._error(exc)
            if worked:
                idle = self.poll
            else:
                self._stop.wait(idle)
                idle = min(idle * 2, self.max_idle)

    def _error(self, exc: Exception) -> None:
        self.stats.errors += 1
        log.warning("participant crowd: %s", exc)
        if self.on_error:
            self.on_error(exc)

    # -- one pass -------------------------------------------------------------------------------------------
    def arrived(self, w: SimWorker) -> bool:
        start = self._start_time if self._start_time is not None else self.clock.now()
        return self.clock.now() >= start + w.arrival

    def step(self) -> int:
        """Each arrived participant, in the seeded order, works on or starts one study; returns the
        number of HITs submitted in this pass."""
        submitted = 0
        for w in self._order:
            if self._stop.is_set():
                break
            if not self.arrived(w):
                continue
            try:
                submitted += self._act(w)
            except (ParticipantError, SiteError, OSError) as exc:
                if isinstance(exc, SiteError) and exc.status == 403:
                    self._sessions.pop(w.worker_id, None)  # no longer admitted (timed out, returned): drop it
                self._error(exc)
        return submitted

    def _act(self, w: SimWorker) -> int:
        session = self._sessions.get(w.worker_id)
        if session is not None:
            if self.clock.now() < session.next_try:
                return 0
            return self._work(w, session, self._call("GET", "/prolific/api/next", session.query))
        p = self.participants[w.worker_id]
        for study in p.studies():
            if self.wants is not None and not self.wants(study):
                continue
            if self._away.get((w.worker_id, str(study["id"])), -math.inf) > self.clock.now():
                continue
            session = self._take(w, p, study)
            if session is not None:
                return self._work(w, session, self._call("GET", "/prolific/api/next", session.query))
            return 0  # returned or abandoned: one decision per pass
        return 0

    def _take(self, w: SimWorker, p: Participant, study: dict[str, Any]) -> _Session | None:
        """Start the study (a place is reserved); a seeded few then return or abandon it."""
        n = self._taken.get(w.worker_id, 0)
        try:
            sub, url = p.start(str(study["id"]))
        except ParticipantError as exc:
            if exc.status in (400, 403, 404):  # the last place went to someone else meanwhile, or closed
                self.stats.refused += 1
                return None
            raise
        self._taken[w.worker_id] = n + 1
        self.stats.started += 1
        if self.adversaries.after_start(w, p, str(study["id"]), sub):
            return None
        fate = self._fate(w, n)
        if fate == "return":
            p.give_back(sub)
            self.stats.returned += 1
            return None
        if fate == "abandon":
            self.stats.abandoned += 1  # never touches the site again; the emulator times the place out
            return None
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
        session = _Session(str(study["id"]), sub, {k: query.get(k, "") for k in SESSION_KEYS})
        if session.query != {"PROLIFIC_PID": p.id, "STUDY_ID": session.study_id, "SESSION_ID": sub}:
            raise SiteError(0, "BadStudyURL", f"the study URL does not carry this session's placeholders: {url}")
        self._sessions[w.worker_id] = session
        return session

    def _fate(self, w: SimWorker, n: int) -> str:
        """What this worker does with the n-th study it starts: "return", "abandon" or "work". Keyed by the
        count (which a restarted crowd reads back from the participant's submissions), not by study ids,
        which differ from run to run."""
        x = float(rng_for(self.seed, "participant-leaves", w.worker_id, n).random())
        if x < self.return_share:
            return "return"
        return "abandon" if x < self.return_share + self.abandon_share else "work"

    def _work(self, w: SimWorker, session: _Session, step: dict[str, Any]) -> int:
        """Do HITs until the door says done (then complete on Prolific) or wait (then try later)."""
        submitted = 0
        adv = self.adversaries
        while step.get("status") == "task":
            if self._stop.is_set():
                return submitted  # the session stays open; the next start picks it up
            aid = str(step["AssignmentId"])
            adv.served.append((aid, w.worker_id))
            stop = adv.stops_before(w, session.submission_id, session.done, int(step.get("bundle") or 1))
            if stop is not None:
                if stop == "return":
                    self.participants[w.worker_id].give_back(session.submission_id)
                    self.stats.returned += 1
                else:
                    self.stats.abandoned += 1  # holds the HIT, never comes back; the emulator times the place out
                del self._sessions[w.worker_id]
                return submitted
            self.stats.accepted += 1
            form = parse_form(self._call("GET", "/prolific/api/task", {**session.query, "assignmentId": aid}, raw=True))
            rng = rng_for(self.seed, "answer", w.worker_id, _content(form))
            fields = adv.fields(w, session.study_id, form, rng)
            target = adv.foreign_target(w)
            if target is not None:
                self._misdirected(w, session, target, fields)
            try:
                step = self._call("POST", "/prolific/api/submit", {**session.query, "assignmentId": aid, "fields": fields})
            except SiteError as exc:
                if adv.behaviour(w.worker_id) is None:
                    raise
                # refused (or the site failed on it): the adversary gives up and returns the place
                adv.outcome(w, False, exc.code or f"HTTP{exc.status}", own=True)
                self.participants[w.worker_id].give_back(session.submission_id)
                self.stats.returned += 1
                del self._sessions[w.worker_id]
                return submitted
            adv.outcome(w, True, own=True)
            again = adv.second_fields(w, fields)
            if again is not None:
                self._misdirected(w, session, aid, again)
            session.done += 1
            submitted += 1
            self.stats.submitted += 1
            self.stats.by_worker[w.worker_id] = self.stats.by_worker.get(w.worker_id, 0) + 1
            pid = session.query["PROLIFIC_PID"]
            self.stats.by_participant[pid] = self.stats.by_participant.get(pid, 0) + 1
        if step.get("status") == "done":
            self.adversaries.saw_redirect(session.study_id, str(step.get("redirect", "")))
            self.participants[w.worker_id].complete_from_redirect(session.submission_id, str(step.get("redirect", "")))
            self.stats.completed += 1
            del self._sessions[w.worker_id]
        elif step.get("status") == "return":  # the site has nothing for this participant: as the page asks
            self._away[(w.worker_id, session.study_id)] = self.clock.now() + SENT_BACK_AWAY
            self.participants[w.worker_id].give_back(session.submission_id)
            self.stats.returned += 1
            del self._sessions[w.worker_id]
        elif step.get("status") == "wait":
            self.stats.waits += 1
            session.waits += 1
            if session.waits > self.max_waits:
                # What the site's page asks a person with nothing to do: return the place for someone else.
                self.participants[w.worker_id].give_back(session.submission_id)
                self.stats.returned += 1
                del self._sessions[w.worker_id]
            else:
                # the back-off is in real seconds, like `poll`: that many times the clock's speed of its time
                backoff = min(self.poll * 2 ** session.waits, self.max_idle * 4)
                session.next_try = self.clock.now() + backoff * float(getattr(self.clock, "speed", 1.0))
        else:
            raise SiteError(0, "UnexpectedStep", f"the task site answered {step!r}")
        return submitted

    def _misdirected(self, w: SimWorker, session: _Session, assignment_id: str, fields: Any) -> None:
        """An answer the door must refuse (someone else's assignment, or one already answered); noted as
        the adversary's outcome either way."""
        try:
            self._call("POST", "/prolific/api/submit", {**session.query, "assignmentId": assignment_id, "fields": fields})
            self.adversaries.outcome(w, True)
        except SiteError as exc:
            self.adversaries.outcome(w, False, exc.code or f"HTTP{exc.status}")

    # -- the task site over HTTP ----------------------------------------------------------------------------
    def _call(self, method: str, path: str, data: dict[str, Any], raw: bool = False) -> Any:
        url = self.site + path
        body = None
        if method == "GET":
            url += "?" + urllib.parse.urlencode(data)
        else:
            body = json.dumps(data).encode("utf-8")
        status, _, answer = open_url(method, url, {"Content-Type": "application/json"} if body is not None else {}, body, 30)
        if status >= 400:
            try:
                err = json.loads(answer or b"{}")
            except ValueError:
                err = {}
            if not isinstance(err, dict):
                err = {}
            raise SiteError(status, str(err.get("error", "")), str(err.get("message", "")))
        text = answer.decode("utf-8")
        return text if raw else json.loads(text)


def _content(form: Form) -> str:
    """What a person reads on the page (task kind and the shown texts), not the assignment's ids: the
    answer's seed, so the same worker answers the same HIT alike wherever it is shown."""
    shown = [form.data.get("task", "")] + [s.text for s in form.slots]
    return hashlib.sha256(json.dumps(shown).encode("utf-8")).hexdigest()
