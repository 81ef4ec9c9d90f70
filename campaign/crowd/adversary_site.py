"""What an adversarial worker does with an assignment it accepted on the built-in marketplace's worker
site (the MTurk-style crowd of `campaign.crowd.runner`). The behaviours are described in
`campaign.crowd.adversaries`; this module carries them out over HTTP as a browser or a hand-made
request would: the worker origin's API with the worker's own session cookie and CSRF token, and the
content origin's form target (found, as a browser finds it, in the work page's frame).
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable, Sequence

import numpy as np

from campaign.crowd.adversaries import (
    AdversaryStats,
    Reply,
    answer_names,
    as_spammer,
    control_fields,
    empty_fields,
    encode_form,
    frame_srcs,
    garbage_body,
    origin_of,
    request,
)
from campaign.crowd.forms import Form, parse_form
from campaign.crowd.models import SimWorker
from campaign.market.worker_client import WorkerAPIError, WorkerClient

log = logging.getLogger(__name__)

FORM = "application/x-www-form-urlencoded"


class SiteAdversaries:
    """Carries out the adversaries' behaviours for one crowd. `answer(worker, form, rng)` is the crowd's
    honest answerer; `others()` lists (assignment id, worker id, HIT id) of assignments the crowd
    accepted, newest first (the ids an adversary could have learnt). `foreign` only targets the same HIT's
    (taken by workers earlier in its seeded order), so its target does not depend on timing."""

    def __init__(self, base_url: str, client: WorkerClient, behaviours: dict[str, str],
                 answer: Callable[[SimWorker, Form, np.random.Generator], list[tuple[str, str]]],
                 others: Callable[[], Sequence[tuple[str, str, str]]]) -> None:
        self.base_url = base_url.rstrip("/")
        self.client = client
        self.behaviours = behaviours
        self.answer = answer
        self.others = others
        self.stats = AdversaryStats()
        self.content_origin: str | None = None
        self.held: set[str] = set()  # assignments `hold` keeps
        self._current_hit = ""

    def behaviour(self, worker_id: str) -> str | None:
        return self.behaviours.get(worker_id)

    # -- requests -----------------------------------------------------------------------------------------
    def _session_headers(self, worker_id: str) -> dict[str, str]:
        cookie, csrf = self.client.sessions().get(worker_id, ("", ""))
        return {"Cookie": f"mkt_session={cookie}", "X-CSRF-Token": csrf}

    def _post_worker(self, worker_id: str, body: bytes) -> Reply:
        return request(self.base_url + "/mturk/externalSubmit", "POST", body,
                       {"Content-Type": FORM, **self._session_headers(worker_id)})

    def _post_content(self, worker_id: str, assignment_id: str, body: bytes) -> Reply:
        origin = self._content_origin(worker_id, assignment_id)
        if origin is None:
            return Reply(0, b"", "NoContentOrigin")
        return request(origin + "/mturk/externalSubmit", "POST", body, {"Content-Type": FORM})

    def _content_origin(self, worker_id: str, assignment_id: str) -> str | None:
        """Where the work page frames the HIT from: its first frame's origin."""
        if self.content_origin is None:
            q = urllib.parse.urlencode({"assignmentId": assignment_id})
            page = request(f"{self.base_url}/worker/work?{q}", headers=self._session_headers(worker_id))
            srcs = frame_srcs(page.body.decode("utf-8", "replace")) if page.status == 200 else []
            if srcs and srcs[0].startswith("http"):
                self.content_origin = origin_of(srcs[0])
        return self.content_origin

    def _post(self, behaviour: str, worker_id: str, assignment_id: str, body: bytes, content: bool) -> bool:
        """Posts an answer on one origin; notes the outcome; True when the site took it."""
        self.stats.note(behaviour, "tried")
        reply = self._post_content(worker_id, assignment_id, body) if content else self._post_worker(worker_id, body)
        ok = 200 <= reply.status < 300
        self.stats.note(behaviour, "accepted" if ok else "refused", reply.code)
        return ok

    def _give_up(self, assignment_id: str) -> None:
        """What a refused person does: hand the assignment back (it may be gone already)."""
        try:
            self.client.return_assignment(assignment_id)
        except WorkerAPIError:
            pass

    def _form(self, assignment_id: str, hit_type: str) -> Form:
        return parse_form(self.client.task_html(assignment_id))

    # -- the behaviours ---------------------------------------------------------------------------------------
    def work(self, w: SimWorker, hit: dict, assignment_id: str, rng: np.random.Generator) -> int:
        """Misbehave with an accepted assignment; returns 1 when an answer was recorded for it, else 0."""
        b = self.behaviours[w.worker_id]
        handlers = {"hold": self._hold, "return_midway": self._return_midway, "no_work": self._no_work, "fast": self._fast,
                    "control_chars": self._control_chars, "garbage": self._garbage, "empty": self._empty,
                    "double_submit": self._double, "foreign": self._foreign}
        self._current_hit = str(hit.get("HITId", ""))  # the crowd works one assignment at a time
        return handlers[b](w, str(hit.get("HITTypeId", "")), assignment_id, rng)

    def _one_form(self, b: str, w: SimWorker, assignment_id: str, body: bytes, rng: np.random.Generator) -> int:
        """Post one form on an origin chosen by the seed; a refused adversary hands the assignment back."""
        ok = self._post(b, w.worker_id, assignment_id, body, content=bool(rng.random() < 0.5))
        if not ok:
            self._give_up(assignment_id)
        return int(ok)

    def _honest(self, w: SimWorker, hit_type: str, assignment_id: str, rng: np.random.Generator) -> list[tuple[str, str]]:
        form = self._form(assignment_id, hit_type)
        return answer_names(form, self.answer(w, form, rng))

    def _hold(self, w: SimWorker, hit_type: str, assignment_id: str, rng: np.random.Generator) -> int:
        self.stats.note("hold", "tried")
        self.held.add(assignment_id)
        return 0

    def _return_midway(self, w: SimWorker, hit_type: str, assignment_id: str, rng: np.random.Generator) -> int:
        self._form(assignment_id, hit_type)
        self.stats.note("return_midway", "tried")
        self._give_up(assignment_id)
        return 0

    def _no_work(self, w: SimWorker, hit_type: str, assignment_id: str, rng: np.random.Generator) -> int:
        return self._one_form("no_work", w, assignment_id, encode_form(assignment_id, []), rng)

    def _fast(self, w: SimWorker, hit_type: str, assignment_id: str, rng: np.random.Generator) -> int:
        form = self._form(assignment_id, hit_type)  # loaded, never read: random values at once
        fields = answer_names(form, self.answer(as_spammer(w), form, rng))
        return self._one_form("fast", w, assignment_id, encode_form(assignment_id, fields), rng)

    def _control_chars(self, w: SimWorker, hit_type: str, assignment_id: str, rng: np.random.Generator) -> int:
        fields = control_fields(self._honest(w, hit_type, assignment_id, rng), rng)
        return self._one_form("control_chars", w, assignment_id, encode_form(assignment_id, fields), rng)

    def _garbage(self, w: SimWorker, hit_type: str, assignment_id: str, rng: np.random.Generator) -> int:
        body = garbage_body(assignment_id, self._honest(w, hit_type, assignment_id, rng), rng)
        return self._one_form("garbage", w, assignment_id, body, rng)

    def _empty(self, w: SimWorker, hit_type: str, assignment_id: str, rng: np.random.Generator) -> int:
        fields = empty_fields(self._honest(w, hit_type, assignment_id, rng), rng)
        return self._one_form("empty", w, assignment_id, encode_form(assignment_id, fields), rng)

    def _double(self, w: SimWorker, hit_type: str, assignment_id: str, rng: np.random.Generator) -> int:
        """A real answer on the worker origin, then two more answers to the same assignment (another
        value each) on both origins: the site must keep the first and refuse the others."""
        honest = self._honest(w, hit_type, assignment_id, rng)
        ok = self._post("double_submit", w.worker_id, assignment_id, encode_form(assignment_id, honest), False)
        other = [(k, v + "1" if v.isdigit() else v) for k, v in honest]
        self._post("double_submit", w.worker_id, assignment_id, encode_form(assignment_id, other), False)
        self._post("double_submit", w.worker_id, assignment_id, encode_form(assignment_id, other), True)
        if not ok:
            self._give_up(assignment_id)
        return int(ok)

    def _foreign(self, w: SimWorker, hit_type: str, assignment_id: str, rng: np.random.Generator) -> int:
        """Answer someone else's assignment: through this worker's own session (which must look exactly
        like an unknown id) and through the content origin (which knows assignments by id alone), then
        hand back its own."""
        targets = [(aid, wid) for aid, wid, hit in self.others() if wid != w.worker_id and hit == self._current_hit]
        form = self._form(assignment_id, hit_type)
        fields = answer_names(form, self.answer(as_spammer(w), form, rng))
        if targets:
            held = [t for t in targets if t[0] in self.held]
            aid = (held or targets)[0][0]
            self._post("foreign", w.worker_id, aid, encode_form(aid, fields), False)
            self._post("foreign", w.worker_id, aid, encode_form(aid, fields), True)
        self._give_up(assignment_id)
        return 0
