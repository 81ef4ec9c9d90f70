"""What an adversarial Prolific participant does (the crowd of `campaign.crowd.participants`): the
behaviours of `campaign.crowd.adversaries`, carried out through the Prolific emulator's participant app
and the task site's door (`/prolific/api/...`), as a person or a script in their browser would.

The participant crowd asks this module three things: what to do right after a place is started
(`after_start`), what to post as a HIT's `fields` (`fields`), and whether to stop working in the middle
of a bundle (`stops_before`); it reports refusals back (`refused`).
"""

from __future__ import annotations

import urllib.parse
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from campaign.crowd.adversaries import (
    AdversaryStats,
    answer_names,
    as_spammer,
    control_fields,
    empty_fields,
    garbage_json_fields,
)
from campaign.crowd.forms import Form
from campaign.crowd.models import SimWorker
from campaign.prolific.emulator.participant import Participant, ParticipantError
from campaign.rng import rng_for

Answer = Callable[[SimWorker, Form, np.random.Generator], list[tuple[str, str]]]


class DoorAdversaries:
    def __init__(self, behaviours: dict[str, str], answer: Answer, seed: int) -> None:
        self.behaviours = behaviours
        self.answer = answer
        self.seed = seed
        self.stats = AdversaryStats()
        self.codes: dict[str, str] = {}  # study id -> a completion code some participant was redirected with
        self.served: deque[tuple[str, str]] = deque(maxlen=100)  # (assignment id, worker id) the door handed out

    def behaviour(self, worker_id: str) -> str | None:
        return self.behaviours.get(worker_id)

    def saw_redirect(self, study_id: str, redirect: str) -> None:
        """A completion redirect some participant got: its code is now known to the whole crowd."""
        code = urllib.parse.parse_qs(urllib.parse.urlsplit(redirect).query).get("cc", [None])[0]
        if code:
            self.codes.setdefault(study_id, code)

    def after_start(self, w: SimWorker, p: Participant, study_id: str, submission_id: str) -> bool:
        """Right after starting a place: `no_work` completes it at once (with a leaked code if the crowd
        has one, else none) and is done with it. True when the place is finished with."""
        if self.behaviours.get(w.worker_id) != "no_work":
            return False
        self.stats.note("no_work", "tried")
        try:
            p.complete(submission_id, self.codes.get(study_id))
            self.stats.note("no_work", "accepted")
        except ParticipantError as exc:
            self.stats.note("no_work", "refused", f"HTTP{exc.status}")
        return True

    def stops_before(self, w: SimWorker, submission_id: str, done: int, bundle: int) -> str | None:
        """Before the next HIT of a bundle of `bundle` (`done` submitted so far): "hold" to keep the HIT and
        never come back, "return" to return the place now, or None to go on. `return_midway` stops after
        1-3 HITs, and always before the bundle's last (else it would have completed the place)."""
        b = self.behaviours.get(w.worker_id)
        if b == "hold":
            self.stats.note(b, "tried")
            return "hold"
        if b == "return_midway":
            k = 1 + int(rng_for(self.seed, "return-midway", w.worker_id, submission_id).integers(0, max(1, min(3, bundle - 1))))
            if done >= k:
                self.stats.note(b, "tried")
                return "return"
        return None

    def fields(self, w: SimWorker, study_id: str, form: Form, rng: np.random.Generator) -> Any:
        """What the participant posts as the HIT's `fields` (a list of [name, value], or junk)."""
        b = self.behaviours.get(w.worker_id)
        honest = answer_names(form, self.answer(w, form, rng))
        if b is None or b in ("double_submit", "return_midway"):
            return [list(f) for f in honest]
        self.stats.note(b, "tried")
        if b == "control_chars":
            return [list(f) for f in control_fields(honest, rng)]
        if b == "garbage":
            return garbage_json_fields(honest, rng)
        if b == "empty":
            return [list(f) for f in empty_fields(honest, rng)]
        # fast and foreign answer at random
        return [list(f) for f in answer_names(form, self.answer(as_spammer(w), form, rng))]

    def foreign_target(self, w: SimWorker) -> str | None:
        """Another participant's assignment id, if this one answers other people's work."""
        if self.behaviours.get(w.worker_id) != "foreign":
            return None
        return next((aid for aid, wid in reversed(self.served) if wid != w.worker_id), None)

    def second_fields(self, w: SimWorker, first: Sequence[Sequence[str]]) -> Any:
        """For `double_submit`: the same HIT posted again with other values (None: post nothing more)."""
        if self.behaviours.get(w.worker_id) != "double_submit":
            return None
        self.stats.note("double_submit", "tried")
        return [[k, v + "1" if v.isdigit() else v] for k, v in first]

    def outcome(self, w: SimWorker, accepted: bool, code: str = "", *, own: bool = False) -> None:
        """Notes what the door did with an adversary's post. `own`: the HIT's own answer, which is the
        misbehaviour only for the behaviours that corrupt it (not for double_submit and foreign, whose
        misbehaviour is the other post)."""
        b = self.behaviours.get(w.worker_id)
        if b is None or b in ("hold", "return_midway", "no_work") or own and b in ("double_submit", "foreign"):
            return
        self.stats.note(b, "accepted" if accepted else "refused", code)
