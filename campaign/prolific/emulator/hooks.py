"""Prolific's webhooks in the emulator: secrets, subscriptions, events and their signed deliveries.

As the description has them (`openapi.yml`, tag `webhooks`; `webhooks-asyncapi.yml`; the reference's
corrections): one secret per workspace (`POST /hooks/secrets/` replaces it); a subscription names a
workspace, an event type and a target URL, is created disabled with the confirmation secret in the
answer's `X-Hook-Secret` header and is enabled by `POST /hooks/subscriptions/{id}/` with that secret;
`GET .../events/` lists what was sent to it. Only enabled subscriptions get events.

A delivery is a JSON `POST` to the target URL whose body is the payload serialised as Python's default
`json.dumps` does (`", "` and `": "`), signed with the workspace's secret:
`X-Prolific-Request-Signature` = base64(HMAC-SHA256(secret, timestamp + body)), the timestamp (Unix
seconds: the emulator's clock on a run's timeline, wall time when it delivers on its own thread) in
`X-Prolific-Request-Timestamp`, the event's id in `X-Event-ID`.
Events are written in the same transaction as the change that caused them (a refused request leaves
none) and sent afterwards, never inside a request, by `HookDelivery`: on the run's timeline as one
more actor (virtual time) or by its own thread (wall time). A target that does not answer 2xx is tried
again with exponential back-off (`RETRY_BASE` doubling, a deterministic jitter) up to `MAX_ATTEMPTS`
times, then the event stays FAILED.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import secrets
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from campaign.prolific.emulator.common import ApiError, iso, new_id, not_found

if TYPE_CHECKING:
    from campaign.prolific.emulator.engine import Emulator

SUBMISSION_STATUS_CHANGE = "submission.status.change"
EVENT_TYPES = {SUBMISSION_STATUS_CHANGE: "A submission's status changed (started, completed, returned, timed out, "
                                         "approved, rejected...)."}
MAX_ATTEMPTS = 8  # the first try and 7 retries
RETRY_BASE = 30.0  # seconds of the emulator's clock before the first retry; doubles each time
SIGNATURE_HEADER = "X-Prolific-Request-Signature"
TIMESTAMP_HEADER = "X-Prolific-Request-Timestamp"
EVENT_ID_HEADER = "X-Event-ID"

Post = Callable[[str, dict[str, str], bytes], int]  # (url, headers, body) -> HTTP status (0: no answer)


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """base64(HMAC-SHA256(secret, timestamp + body)): what the receiver computes to verify."""
    mac = hmac.new(secret.encode("utf-8"), timestamp.encode("utf-8") + body, hashlib.sha256).digest()
    return base64.b64encode(mac).decode("ascii")


class HookOperations:
    """The research API's `hooks/` operations over the emulator's documents (mixed into `Emulator`)."""

    db: Any
    clock: Any

    # -- event types and secrets --------------------------------------------------------------------
    @staticmethod
    def event_types() -> dict[str, Any]:
        return {"results": [{"event_type": k, "description": v} for k, v in EVENT_TYPES.items()]}

    def _hook_workspace(self, user: dict[str, Any], ws_id: Any) -> str:
        ws = self.db.get("workspace", str(ws_id or ""))
        if not isinstance(ws_id, str) or ws is None or ws["owner"] != user["id"]:
            raise ApiError(400, {"workspace_id": ["Give the id of one of your workspaces."]})
        return ws_id

    def list_secrets(self, user: dict[str, Any], query: dict[str, str]) -> dict[str, Any]:
        ws_id = self._hook_workspace(user, query.get("workspace_id"))
        found = self.db.get("hook_secret", ws_id)
        return {"results": [] if found is None else [self._secret_out(found)]}

    def create_secret(self, user: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        """A new secret for the workspace; the old one (if any) stops signing at once."""
        ws_id = self._hook_workspace(user, body.get("workspace_id"))
        doc = {"id": ws_id, "secret_id": new_id(), "value": secrets.token_urlsafe(32), "workspace_id": ws_id}
        self.db.put("hook_secret", doc, owner=user["id"])
        return self._secret_out(doc)

    @staticmethod
    def _secret_out(doc: dict[str, Any]) -> dict[str, Any]:
        return {"id": doc["secret_id"], "value": doc["value"], "workspace_id": doc["workspace_id"]}

    # -- subscriptions ------------------------------------------------------------------------------------
    def _subscription(self, user: dict[str, Any], sub_id: str) -> dict[str, Any]:
        doc = self.db.get("hook_subscription", sub_id)
        if doc is None or doc["owner"] != user["id"]:
            raise not_found("Subscription")
        return doc

    @staticmethod
    def subscription_out(doc: dict[str, Any]) -> dict[str, Any]:
        return {k: doc[k] for k in ("id", "event_type", "target_url", "is_enabled", "workspace_id")}

    @staticmethod
    def _check_target(url: Any) -> str:
        if not isinstance(url, str) or not url.startswith(("https://", "http://")) or len(url) > 2000:
            raise ApiError(400, {"target_url": ["Enter a valid URL."]})
        return url

    @staticmethod
    def _check_event_type(event_type: Any) -> str:
        if event_type not in EVENT_TYPES:
            raise ApiError(400, {"event_type": [f'"{event_type}" is not an event type (GET /hooks/event-types/ lists them).']})
        return str(event_type)

    def list_subscriptions(self, user: dict[str, Any], query: dict[str, str]) -> dict[str, Any]:
        """Enabled ones unless `is_enabled=false`; all workspaces unless `workspace_id`."""
        enabled = str(query.get("is_enabled", "true")).lower() not in ("false", "0")
        ws = query.get("workspace_id")
        rows = [d for d in self.db.owned("hook_subscription", user["id"])
                if d["is_enabled"] == enabled and (not ws or d["workspace_id"] == ws)]
        return {"results": [self.subscription_out(d) for d in rows]}

    def create_subscription(self, user: dict[str, Any], body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        """201, the new subscription (disabled until confirmed) and its confirmation secret as `X-Hook-Secret`."""
        ws_id = self._hook_workspace(user, body.get("workspace_id"))
        if self.db.get("hook_secret", ws_id) is None:
            raise ApiError(400, {"workspace_id": ["Create a secret for this workspace first (POST /hooks/secrets/)."]})
        doc = {"id": new_id(), "owner": user["id"], "workspace_id": ws_id,
               "event_type": self._check_event_type(body.get("event_type")),
               "target_url": self._check_target(body.get("target_url")),
               "is_enabled": False, "confirm": secrets.token_hex(16)}
        self.db.put("hook_subscription", doc, owner=user["id"])
        return 201, {"results": [self.subscription_out(doc)]}, {"X-Hook-Secret": doc["confirm"]}

    def get_subscription(self, user: dict[str, Any], sub_id: str) -> dict[str, Any]:
        return self.subscription_out(self._subscription(user, sub_id))

    def confirm_subscription(self, user: dict[str, Any], sub_id: str, body: dict[str, Any]) -> dict[str, Any]:
        doc = self._subscription(user, sub_id)
        given = body.get("secret")
        if not isinstance(given, str) or not secrets.compare_digest(given, doc["confirm"]):
            raise ApiError(400, {"secret": ["This is not the secret this subscription was created with."]})
        doc["is_enabled"] = True
        self.db.put("hook_subscription", doc)
        return self.subscription_out(doc)

    def update_subscription(self, user: dict[str, Any], sub_id: str, body: dict[str, Any]) -> dict[str, Any]:
        doc = self._subscription(user, sub_id)
        if "event_type" in body:
            doc["event_type"] = self._check_event_type(body["event_type"])
        if "target_url" in body:
            doc["target_url"] = self._check_target(body["target_url"])
        if "is_enabled" in body:
            if not isinstance(body["is_enabled"], bool):
                raise ApiError(400, {"is_enabled": ["Must be a boolean."]})
            doc["is_enabled"] = body["is_enabled"]
        self.db.put("hook_subscription", doc)
        return self.subscription_out(doc)

    def delete_subscription(self, user: dict[str, Any], sub_id: str) -> None:
        self._subscription(user, sub_id)
        self.db.delete("hook_subscription", sub_id)

    def subscription_events(self, user: dict[str, Any], sub_id: str, query: dict[str, str]) -> list[dict[str, Any]]:
        self._subscription(user, sub_id)
        wanted = query.get("status")
        statuses: set[str] | None = None
        if wanted:
            try:
                parsed = json.loads(wanted) if wanted.startswith("[") else [wanted]
            except ValueError:
                raise ApiError(400, {"status": ["A status or a JSON list of statuses."]}) from None
            statuses = {str(s) for s in parsed}
        rid = query.get("resource_id")
        return [self.event_out(e) for e in self.db.children("hook_event", sub_id)
                if (statuses is None or e["status"] in statuses) and (not rid or e["resource_id"] == rid)]

    @staticmethod
    def event_out(e: dict[str, Any]) -> dict[str, Any]:
        return {"id": e["id"], "datetime_created": iso(e["created"]), "datetime_updated": iso(e["updated"]),
                "event_type": e["event_type"], "resource_id": e["resource_id"], "status": e["status"],
                "target_url": e["target_url"], "payload": e["payload"]}

    # -- events -----------------------------------------------------------------------------------------
    def emit(self, workspace_id: str, event_type: str, resource_id: str, payload: dict[str, Any]) -> None:
        """An event for every enabled subscription of the workspace to `event_type`, to be delivered after
        this request's transaction commits (`HookDelivery`)."""
        now = self.clock.now()
        for doc in self.db.all("hook_subscription"):
            if doc["workspace_id"] != workspace_id or doc["event_type"] != event_type or not doc["is_enabled"]:
                continue
            event_id = new_id()
            self.db.put("hook_event", {"id": event_id, "subscription": doc["id"], "event_type": event_type,
                                       "resource_id": resource_id, "payload": payload, "target_url": doc["target_url"],
                                       "status": "PENDING", "attempts": 0, "created": now, "updated": now},
                        parent=doc["id"])
            self.db.put("hook_due", {"id": event_id, "next_at": now})  # the short list of what is still to send

    def submission_changed(self, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        """Called before a submission is written: a new status is a `submission.status.change` event."""
        if old is not None and old.get("status") == new.get("status"):
            return
        study = self.db.get("study", new["study_id"])
        if study is None:
            return
        self.emit(study["workspace"], SUBMISSION_STATUS_CHANGE, new["id"],
                  {"event_type": SUBMISSION_STATUS_CHANGE, "resource_id": new["id"],
                   "participant_id": new["participant_id"], "status": new["status"]})


class HookDelivery:
    """Sends the emulator's pending hook events. `step()` sends every event due now (and lets the emulator
    time out what is overdue first, as Prolific does on its own); `next_due()` says when there is next
    something to do. On virtual time the run's timeline calls both (`campaign.timeline.Crowd`); on wall
    time `start()` runs them on a thread of its own."""

    def __init__(self, emulator: Emulator, post: Post | None = None) -> None:
        self.em = emulator
        self.post = post or _post
        self._due = -math.inf  # the earliest pending event's time; -inf: look again
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        # what the signature's timestamp is read from: the emulator's clock on the run's timeline (the
        # receiver checks it against the same clock); wall time once delivering on its own thread, as
        # Prolific signs, since a standalone emulator's clock may run faster than the receiver's
        self.stamp_now: Callable[[], float] = emulator.clock.now
        self.delivered = 0
        self.failed = 0
        previous = emulator.db.on_put

        def written(kind: str) -> None:
            if previous is not None:
                previous(kind)
            if kind in ("hook_due", "submission", "study") or kind.startswith("*"):
                self._due = -math.inf
                self._wake.set()  # a delivering thread sends a new event now, not at its next look
        emulator.db.on_put = written

    def next_due(self) -> float:
        now = self.em.clock.now()
        if self._due == -math.inf:
            with self.em.db.transaction():
                self._due = min((float(d["next_at"]) for d in self.em.db.all("hook_due")), default=math.inf)
        sweep = self.em._sweep_due  # -inf: a write since the last sweep, which may have started a clock
        # a time-out (or an automatic approval) happens once its limit is passed, not at the limit itself
        sweep = sweep if sweep == -math.inf else math.nextafter(sweep, math.inf)
        due = min(self._due, sweep)
        return now if due < now else due

    def step(self) -> int:
        """Send every event due now; returns how many were answered 2xx."""
        em = self.em
        with em.db.transaction():
            em.sweep()  # time-outs past their limit happen on Prolific's clock, whether or not anyone asks
            now = em.clock.now()
            due = [d["id"] for d in em.db.all("hook_due") if float(d["next_at"]) <= now]
            sends = []
            for event_id in due:
                e = em.db.get("hook_event", event_id)
                sub = em.db.get("hook_subscription", e["subscription"]) if e is not None else None
                secret = em.db.get("hook_secret", sub["workspace_id"]) if sub is not None else None
                if e is None or sub is None or secret is None:  # deleted since: nothing to send it to
                    em.db.delete("hook_due", event_id)
                    if e is not None:
                        e.update(status="FAILED", updated=now)
                        em.db.put("hook_event", e)
                    continue
                body = json.dumps(e["payload"]).encode("utf-8")
                stamp = str(int(self.stamp_now()))
                sends.append((e, sub["target_url"], {"Content-Type": "application/json", EVENT_ID_HEADER: e["id"],
                                                     TIMESTAMP_HEADER: stamp,
                                                     SIGNATURE_HEADER: sign(secret["value"], stamp, body)}, body))
        ok = 0
        results = []
        for e, url, headers, body in sends:  # outside the transaction: the target may call the emulator back
            try:
                status = self.post(url, headers, body)
            except Exception:  # noqa: BLE001 - an unreachable target is a failed delivery, tried again later
                status = 0
            results.append((e["id"], 200 <= status < 300))
        with em.db.transaction():
            now = em.clock.now()
            for event_id, good in results:
                e = em.db.get("hook_event", event_id)
                if e is None:
                    continue
                e["attempts"] = int(e["attempts"]) + 1
                e["updated"] = now
                if good:
                    e["status"] = "SUCCEEDED"
                    ok += 1
                    self.delivered += 1
                else:
                    self.failed += 1
                    e["status"] = "FAILED"
                em.db.put("hook_event", e)
                if good or e["attempts"] >= MAX_ATTEMPTS:
                    em.db.delete("hook_due", event_id)
                else:
                    em.db.put("hook_due", {"id": event_id, "next_at": now + retry_delay(event_id, e["attempts"])})
        self._due = -math.inf  # deletions tell nobody: look again
        return ok

    def start(self) -> None:
        """Deliver on a thread of its own (wall time)."""
        if self._thread is not None:
            return
        self.stamp_now = time.time

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    self.step()
                    wait = self.next_due() - self.em.clock.now()
                except Exception:  # noqa: BLE001 - the emulator closed under us, or a bad row: try again shortly
                    wait = 1.0
                self._wake.wait(min(max(wait, 0.05), 1.0))
                self._wake.clear()
        self._thread = threading.Thread(target=loop, name="prolific-hooks", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def retry_delay(event_id: str, attempts: int) -> float:
    """Seconds before the next try after `attempts` failed ones: doubling from `RETRY_BASE`, with a jitter
    in [0.5, 1) of it drawn from the event id (the same on every run of a seed)."""
    jitter = 0.5 + int(hashlib.sha256(f"{event_id}:{attempts}".encode()).hexdigest()[:8], 16) / 2**33
    return RETRY_BASE * 2 ** (attempts - 1) * jitter


def _post(url: str, headers: dict[str, str], body: bytes) -> int:
    from campaign.web.loopback import open_url

    status, _headers, _body = open_url("POST", url, headers, body, 10.0)
    return status
