"""A participant of the emulator, driven over HTTP as a person drives Prolific's web app: list the
studies open to them, start one (landing on the study URL), then complete with the code the study's
site redirected them with, or return the place. The simulated crowd and the tests use it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from campaign.web.loopback import open_url


class ParticipantError(Exception):
    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail


def _call(url: str, method: str, auth: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode("utf-8")
    headers = {"Authorization": auth}
    if data is not None:
        headers["Content-Type"] = "application/json"
    status, _, raw = open_url(method, url, headers, data, 30)
    if status >= 400:
        try:
            detail = json.loads(raw).get("error", {}).get("detail")
        except (ValueError, AttributeError):
            detail = None
        raise ParticipantError(status, detail)
    return json.loads(raw) if raw.strip() else None


def add_participant(root_url: str, token: str, **profile: Any) -> Participant:
    """Operator call (loopback + research token): a new participant with the given profile.

    `external_id=` names the person on the operator's side: calling again with the same one returns the
    same participant (profile updated, a new secret; the old secret stops working)."""
    out = _call(f"{root_url}/emulator/participants", "POST", "Token " + token, profile)
    return Participant(root_url, out["id"], out["secret"])


class Participant:
    def __init__(self, root_url: str, participant_id: str, secret: str) -> None:
        self.root = root_url.rstrip("/")
        self.id = participant_id
        self._auth = f"Participant {participant_id}:{secret}"

    def __repr__(self) -> str:
        return f"Participant({self.id})"

    def studies(self) -> list[dict[str, Any]]:
        return list(_call(f"{self.root}/emulator/studies", "GET", self._auth)["results"])

    def start(self, study_id: str) -> tuple[str, str]:
        """(submission id, the study URL with Prolific's placeholders filled in)."""
        out = _call(f"{self.root}/emulator/studies/{study_id}/start", "POST", self._auth, {})
        return out["submission_id"], out["url"]

    def complete(self, submission_id: str, code: str | None) -> str:
        return str(_call(f"{self.root}/emulator/submissions/{submission_id}/complete", "POST", self._auth, {"code": code})["status"])

    def complete_from_redirect(self, submission_id: str, redirect_url: str) -> str:
        """Follow the site's final redirect (`...submissions/complete?cc=CODE`) back to Prolific."""
        code = urllib.parse.parse_qs(urllib.parse.urlsplit(redirect_url).query).get("cc", [None])[0]
        return self.complete(submission_id, code)

    def message(self, study_id: str, body: str) -> None:
        """Write to the researcher of a study this participant took part in."""
        _call(f"{self.root}/emulator/messages", "POST", self._auth, {"study_id": study_id, "body": body})

    def give_back(self, submission_id: str) -> str:
        return str(_call(f"{self.root}/emulator/submissions/{submission_id}/return", "POST", self._auth, {})["status"])

    def submissions(self) -> list[dict[str, Any]]:
        """This participant's own submissions, oldest first: what a person sees on coming back."""
        return list(_call(f"{self.root}/emulator/submissions", "GET", self._auth)["results"])

    def submission(self, submission_id: str) -> dict[str, Any]:
        return dict(_call(f"{self.root}/emulator/submissions/{submission_id}", "GET", self._auth))
