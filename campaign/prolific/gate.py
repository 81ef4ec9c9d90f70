"""The task site's door for Prolific participants.

A participant arrives from Prolific at the study URL with `PROLIFIC_PID`, `STUDY_ID` and `SESSION_ID`
filled in. Those are only claims in a URL, which anyone can type: the gate admits the participant only
when Prolific's API confirms that this submission exists, belongs to this participant and this study,
and is still ACTIVE (not returned, timed out or already completed), and when the study is one this
site serves. Another participant's id in the URL, a made-up session or a finished one are refused.

A place can be returned or time out at any moment, so a confirmation is only good for the request it
was made for: `admit` asks the API every time unless the caller says the request changes nothing
(`fresh=False`, e.g. showing again the task a participant already holds) and the site was given a
`ttl`; then a confirmation younger than `ttl` may be reused. Anything that would record work or hand
out a new task is confirmed afresh, and a refusal drops whatever was remembered of that session.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

ID_RE = re.compile(r"^[0-9a-f]{24}$")


class SubmissionSource(Protocol):
    def submission(self, submission_id: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class StudySeat:
    """What the site serves in one study: the HIT type its participants work on, how many HITs make one
    submission, and where to send them when done."""

    study_id: str
    hit_type_id: str
    bundle: int
    completion_code: str
    completion_url: str = "https://app.prolific.com/submissions/complete"

    def redirect(self) -> str:
        return f"{self.completion_url}?cc={self.completion_code}"


@dataclass(frozen=True)
class Admission:
    participant_id: str
    submission_id: str
    seat: StudySeat

    @property
    def worker_id(self) -> str:
        return site_worker_id(self.participant_id)


def site_worker_id(participant_id: str) -> str:
    """The task site's worker id for a Prolific participant: stable across studies, so blocks and "never
    the same HIT twice" follow the person. `AP...`: the built-in marketplace takes MTurk-shaped ids
    (`^A[A-Z0-9]+$`), and the `P` keeps them apart from the simulated MTurk crowd's."""
    return "AP" + participant_id.upper()


class Refused(Exception):
    """Why a participant may not enter; the message is safe to show them."""


class ProlificGate:
    def __init__(self, api: SubmissionSource, seats: Callable[[str], StudySeat | None], *, ttl: float = 0.0,
                 clock: Callable[[], float]) -> None:
        self.api = api
        self.seats = seats
        self.ttl = ttl
        self.clock = clock
        self._ok: dict[str, tuple[float, Admission]] = {}
        # With webhooks on, Prolific tells the site when a session stops being active and the site forgets
        # it at once (`forget`); then a confirmation younger than `ttl` serves every request, recording
        # ones too (False: those always ask; the window is the time a lost hook could go unnoticed).
        self.trust_hooks = False
        self._lock = threading.Lock()

    def admit(self, participant_id: str | None, study_id: str | None, session_id: str | None, *,
              fresh: bool = True) -> Admission:
        """The admission of an ACTIVE submission of this participant in a served study, else `Refused`.
        `fresh=False` only for requests that change nothing (see the module docstring)."""
        pid, sid, sub = (participant_id or "").strip().lower(), (study_id or "").strip().lower(), (session_id or "").strip().lower()
        if not (ID_RE.match(pid) and ID_RE.match(sid) and ID_RE.match(sub)):
            raise Refused("This link is incomplete: please open the study again from Prolific.")
        seat = self.seats(sid)
        if seat is None:
            raise Refused("This study is not served here.")
        now = self.clock()
        if (not fresh or self.trust_hooks) and self.ttl > 0:
            with self._lock:
                cached = self._ok.get(sub)
            if cached is not None and cached[0] > now and cached[1].participant_id == pid and cached[1].seat.study_id == sid:
                return cached[1]
        route = getattr(self.api, "for_study", None)  # one client per campaign: its calls are counted as its own
        try:
            record = (route(sid) if route is not None else self.api).submission(sub)
        except Exception:  # noqa: BLE001 - unknown or unreachable: nobody gets in on an unconfirmed claim
            self.forget(sub)
            raise Refused("Prolific could not confirm this session; please try again from Prolific.") from None
        if str(record.get("participant") or record.get("participant_id")) != pid or str(record.get("study_id")) != sid:
            # Not remembered as refused either: the rightful owner's own requests must still get through.
            raise Refused("This session belongs to someone else.")
        if record.get("status") != "ACTIVE":
            self.forget(sub)
            raise Refused(f"This session is {str(record.get('status', 'unknown')).lower()}; there is no work left in it.")
        admission = Admission(pid, sub, seat)
        if self.ttl > 0:
            with self._lock:
                self._ok[sub] = (now + self.ttl, admission)
        return admission

    def confirm(self, adm: Admission) -> Admission:
        """`adm` checked again with the API, before anything is recorded or handed out on it."""
        return self.admit(adm.participant_id, adm.seat.study_id, adm.submission_id, fresh=True)

    def forget(self, session_id: str) -> None:
        """After the completion redirect or a refusal: nothing remembered of the session."""
        with self._lock:
            self._ok.pop(session_id.lower(), None)
