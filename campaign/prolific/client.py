"""A client for Prolific's researcher API v1, as the reference (`shared/reference/prolific-api.md`) says
real clients use it.

The token comes from the caller or `PROLIFIC_TOKEN`; it is sent only in the `Authorization` header and
never stored, printed, logged or shown in `repr`. `PROLIFIC_BASE_URL` (full, ending in `/api/v1/`)
points the client at another server, such as the emulator.

Retries: 429 and 5xx answers and dropped connections are retried with exponential back-off and jitter
(each wait drawn from the upper half of the doubling delay, so clients throttled together do not come
back together; a 429's `Retry-After`, up to a minute, is waited at least) for calls that are safe to repeat (reads, transitions, which Prolific treats as final and ignores when repeated,
bulk approval). Paying a bonus batch is NOT safe to repeat (a second call pays again), so `pay_bonus`
never retries: its caller records the intent first and checks `bonus_payments` before trying again.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any

from campaign.untrusted import Refused, loads_json
from campaign.web.loopback import open_url

log = logging.getLogger(__name__)
DEFAULT_BASE_URL = "https://api.prolific.com/api/v1/"
REJECTION_MESSAGE_MIN = 100


class ProlificError(Exception):
    """An error answer (`{"error": {...}}`) or a transport failure after the retries."""

    def __init__(self, status: int, title: str, detail: Any) -> None:
        super().__init__(f"Prolific API {status} {title}: {detail}")
        self.status = status
        self.title = title
        self.detail = detail


class ProlificClient:
    def __init__(self, base_url: str | None = None, token: str | None = None, *, timeout: float = 30.0,
                 max_retries: int = 5, sleep: Callable[[float], None] = time.sleep) -> None:
        base = base_url or os.environ.get("PROLIFIC_BASE_URL") or DEFAULT_BASE_URL
        self.base_url = base if base.endswith("/") else base + "/"
        secret = token if token is not None else os.environ.get("PROLIFIC_TOKEN")
        if not secret:
            raise ValueError("no Prolific token: set PROLIFIC_TOKEN (it is never stored or printed)")
        self._auth = "Token " + secret
        self.timeout = timeout
        self.max_retries = max_retries
        self._sleep = sleep
        # every HTTP request sent to Prolific (retries included): what a campaign costs the service
        self.calls = 0

    def __repr__(self) -> str:
        return f"ProlificClient({self.base_url!r})"

    def clone(self) -> ProlificClient:
        """Another client of the same service with the same token, counting its own `calls` (one per
        campaign: what each campaign costs Prolific)."""
        other = copy.copy(self)
        other.calls = 0
        return other

    # -- transport -------------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None,
                retry: bool = True, answer_headers: dict[str, str] | None = None) -> Any:
        """The decoded answer; `answer_headers`, if given, receives the successful answer's headers
        (lower-case names)."""
        url = path if path.startswith(("http://", "https://")) else urllib.parse.urljoin(self.base_url, path.lstrip("/"))
        if query:
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode("utf-8")
        attempts = self.max_retries + 1 if retry else 1
        delay = 0.5
        headers = {"Authorization": self._auth, "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(attempts):
            try:
                self.calls += 1
                status, got_headers, raw = open_url(method, url, headers, data, self.timeout)
                if status < 400:
                    if answer_headers is not None:
                        answer_headers.update(got_headers)
                    try:  # bounded like every JSON from outside (campaign.untrusted): never a RecursionError
                        return loads_json(raw, "Prolific's answer") if raw.strip() else None
                    except Refused as exc:
                        raise ProlificError(status, "Unreadable answer", str(exc)) from None
                if status in (429, 500, 502, 503, 504) and attempt + 1 < attempts:
                    log.info("Prolific answered %s to %s %s; retrying", status, method, path)
                    wait = _retry_after(got_headers.get("retry-after")) if status == 429 else 0.0
                    self._sleep(max(_jittered(delay), wait))
                    delay = min(delay * 2, 30.0)
                    continue
                raise _error(status, raw)
            except (TimeoutError, urllib.error.URLError, ConnectionError) as exc:
                if attempt + 1 < attempts:
                    self._sleep(_jittered(delay))
                    delay = min(delay * 2, 30.0)
                    continue
                raise ProlificError(0, "Unreachable", str(getattr(exc, "reason", exc))) from None
        raise AssertionError("unreachable")

    def pages(self, path: str, query: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Every result of a list endpoint, following `_links.next` where the server pages."""
        out: list[dict[str, Any]] = []
        page: Any = self.request("GET", path, query=query)
        while True:
            out.extend(page.get("results", []) if isinstance(page, dict) else [])
            nxt = ((page.get("_links") or {}).get("next") or {}).get("href") if isinstance(page, dict) else None
            if not nxt:
                return out
            page = self.request("GET", nxt)

    # -- account -----------------------------------------------------------------------------------------
    def me(self) -> dict[str, Any]:
        return self.request("GET", "users/me/")

    def workspaces(self) -> list[dict[str, Any]]:
        return self.pages("workspaces/")

    def create_workspace(self, title: str, currency_code: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"title": title}
        if currency_code:
            body["currency_code"] = currency_code
        return self.request("POST", "workspaces/", body)

    def balance(self, workspace_id: str) -> dict[str, Any]:
        return self.request("GET", f"workspaces/{workspace_id}/balance/")

    def projects(self, workspace_id: str) -> list[dict[str, Any]]:
        return self.pages(f"workspaces/{workspace_id}/projects/")

    def create_project(self, workspace_id: str, title: str) -> dict[str, Any]:
        return self.request("POST", f"workspaces/{workspace_id}/projects/", {"title": title})

    # -- studies -------------------------------------------------------------------------------------------
    def create_study(self, fields: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", "studies/", fields, retry=False)  # not idempotent: the caller reconciles

    def study(self, study_id: str) -> dict[str, Any]:
        return self.request("GET", f"studies/{study_id}/")

    def studies(self, state: str | None = None) -> list[dict[str, Any]]:
        return self.pages("studies/", {"state": state} if state else None)

    def project_studies(self, project_id: str) -> list[dict[str, Any]]:
        return self.pages(f"projects/{project_id}/studies/")

    def update_study(self, study_id: str, **fields: Any) -> dict[str, Any]:
        return self.request("PATCH", f"studies/{study_id}/", fields)

    def delete_study(self, study_id: str) -> None:
        self.request("DELETE", f"studies/{study_id}/")

    def transition_study(self, study_id: str, action: str) -> dict[str, Any]:
        return self.request("POST", f"studies/{study_id}/transition/", {"action": action})

    def submission_counts(self, study_id: str) -> dict[str, int]:
        return self.request("GET", f"studies/{study_id}/submissions/counts/")

    def study_cost(self, study_id: str) -> dict[str, Any]:
        return self.request("GET", f"studies/{study_id}/cost/", query={"is_projected": "false"})

    def cost(self, reward: int, places: int) -> int:
        return int(self.request("POST", "study-cost-calculator/", {"reward": reward, "total_available_places": places})["total_cost"])

    # -- filters -------------------------------------------------------------------------------------------
    def filters(self, workspace_id: str | None = None) -> list[dict[str, Any]]:
        """The filter catalogue (`GET /filters/`): each select filter's `choices`, id -> text."""
        return self.pages("filters/", {"workspace_id": workspace_id} if workspace_id else None)

    def eligible_count(self, filters: Sequence[dict[str, Any]], workspace_id: str | None = None) -> int:
        """How many participants the filters reach (`POST /eligibility-count/`)."""
        body: dict[str, Any] = {"filters": list(filters)}
        if workspace_id:
            body["workspace_id"] = workspace_id
        return int(self.request("POST", "eligibility-count/", body)["count"])

    # -- submissions -----------------------------------------------------------------------------------------
    def submissions(self, study_id: str, status: str | None = None) -> list[dict[str, Any]]:
        return self.pages(f"studies/{study_id}/submissions/", {"status": status.replace(" ", "_")} if status else None)

    def submission(self, submission_id: str) -> dict[str, Any]:
        return self.request("GET", f"submissions/{submission_id}/")

    def approve(self, submission_id: str) -> dict[str, Any]:
        return self.request("POST", f"submissions/{submission_id}/transition/", {"action": "APPROVE"})

    def reject(self, submission_id: str, message: str, category: str) -> dict[str, Any]:
        if len(message) < REJECTION_MESSAGE_MIN:
            raise ValueError(f"Prolific needs a rejection message of at least {REJECTION_MESSAGE_MIN} characters")
        return self.request("POST", f"submissions/{submission_id}/transition/",
                            {"action": "REJECT", "message": message, "rejection_category": category})

    def request_return(self, submission_id: str, reasons: Sequence[str]) -> dict[str, Any]:
        """Ask the participant to return the submission (Prolific messages them); their status changes
        only if they do. Experimental on Prolific."""
        return self.request("POST", f"submissions/{submission_id}/request-return/", {"request_return_reasons": list(reasons)})

    def bulk_approve(self, submission_ids: Sequence[str]) -> None:
        for i in range(0, len(submission_ids), 1000):
            self.request("POST", "submissions/bulk-approve/", {"submission_ids": list(submission_ids[i:i + 1000])})

    # -- bonuses ------------------------------------------------------------------------------------------------
    def create_bonus(self, study_id: str, lines: Iterable[tuple[str, Decimal]]) -> dict[str, Any]:
        """A bonus batch (not paid yet); amounts in major units, as the CSV wants them."""
        csv = "\n".join(f"{ident},{Decimal(amount).quantize(Decimal('0.01'))}" for ident, amount in lines)
        return self.request("POST", "submissions/bonus-payments/", {"study_id": study_id, "csv_bonuses": csv}, retry=False)

    def pay_bonus(self, batch_id: str) -> None:
        """Pay a batch. Never retried: Prolific pays again on every call."""
        self.request("POST", f"bulk-bonus-payments/{batch_id}/pay/", retry=False)

    # -- participant groups ----------------------------------------------------------------------------------------
    def create_group(self, name: str, workspace_id: str, participant_ids: Sequence[str] = ()) -> dict[str, Any]:
        return self.request("POST", "participant-groups/", {"name": name, "workspace_id": workspace_id,
                                                            "participant_ids": list(participant_ids)})

    def groups(self, workspace_id: str) -> list[dict[str, Any]]:
        return self.pages("participant-groups/", {"workspace_id": workspace_id})

    def group_members(self, group_id: str) -> list[str]:
        return [m["participant_id"] for m in self.pages(f"participant-groups/{group_id}/participants/")]

    def add_to_group(self, group_id: str, participant_ids: Sequence[str]) -> None:
        self.request("POST", f"participant-groups/{group_id}/participants/", {"participant_ids": list(participant_ids)})

    def remove_from_group(self, group_id: str, participant_ids: Sequence[str]) -> None:
        self.request("DELETE", f"participant-groups/{group_id}/participants/", {"participant_ids": list(participant_ids)})

    def delete_group(self, group_id: str) -> None:
        self.request("DELETE", f"participant-groups/{group_id}/")

    # -- webhooks ("hooks") -------------------------------------------------------------------------------------------
    def event_types(self) -> list[str]:
        return [str(e.get("event_type")) for e in self.request("GET", "hooks/event-types/").get("results", [])]

    def hook_secrets(self, workspace_id: str) -> list[dict[str, Any]]:
        """The workspace's signing secret(s): `value` is the secret itself, never to be logged."""
        return list(self.request("GET", "hooks/secrets/", query={"workspace_id": workspace_id}).get("results", []))

    def create_hook_secret(self, workspace_id: str) -> dict[str, Any]:
        """A new signing secret for the workspace; it replaces the old one (whoever verifies with it must
        read the new one)."""
        return self.request("POST", "hooks/secrets/", {"workspace_id": workspace_id}, retry=False)

    def subscriptions(self, workspace_id: str | None = None, enabled: bool = True) -> list[dict[str, Any]]:
        query: dict[str, Any] = {"is_enabled": "true" if enabled else "false"}
        if workspace_id:
            query["workspace_id"] = workspace_id
        return list(self.request("GET", "hooks/subscriptions/", query=query).get("results", []))

    def create_subscription(self, workspace_id: str, event_type: str, target_url: str) -> tuple[dict[str, Any], str]:
        """(the subscription, disabled until confirmed, and the confirmation secret from `X-Hook-Secret`)."""
        headers: dict[str, str] = {}
        answer = self.request("POST", "hooks/subscriptions/", {"workspace_id": workspace_id, "event_type": event_type,
                                                               "target_url": target_url}, retry=False, answer_headers=headers)
        results = answer.get("results") if isinstance(answer, dict) else None
        sub = results[0] if isinstance(results, list) and results else answer
        return sub, headers.get("x-hook-secret", "")

    def confirm_subscription(self, subscription_id: str, secret: str) -> dict[str, Any]:
        return self.request("POST", f"hooks/subscriptions/{subscription_id}/", {"secret": secret})

    def subscription(self, subscription_id: str) -> dict[str, Any]:
        return self.request("GET", f"hooks/subscriptions/{subscription_id}/")

    def update_subscription(self, subscription_id: str, **fields: Any) -> dict[str, Any]:
        return self.request("PATCH", f"hooks/subscriptions/{subscription_id}/", fields)

    def delete_subscription(self, subscription_id: str) -> None:
        self.request("DELETE", f"hooks/subscriptions/{subscription_id}/")

    def subscription_events(self, subscription_id: str, status: str | None = None,
                            resource_id: str | None = None) -> list[dict[str, Any]]:
        query = {k: v for k, v in (("status", status), ("resource_id", resource_id)) if v}
        return self.pages(f"hooks/subscriptions/{subscription_id}/events/", query or None)


def _jittered(delay: float) -> float:
    return delay * random.uniform(0.5, 1.0)


def _retry_after(value: str | None) -> float:
    """A 429's `Retry-After` in seconds (an HTTP date or nonsense counts as none), at most a minute."""
    try:
        return min(max(float(value or 0), 0.0), 60.0)
    except ValueError:
        return 0.0


def _error(status: int, raw: bytes) -> ProlificError:
    try:
        payload = loads_json(raw, "Prolific's error answer")
    except ValueError:  # Refused
        return ProlificError(status, "HTTP error", raw[:200].decode("utf-8", "replace"))
    err = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(err, dict):
        return ProlificError(status, str(err.get("title", "")), err.get("detail"))
    if isinstance(payload, dict):  # the flat shape some endpoints were seen to send
        return ProlificError(status, str(payload.get("message", "")), payload.get("detail"))
    return ProlificError(status, "HTTP error", payload)
