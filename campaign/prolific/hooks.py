"""Webhooks first: Prolific tells the task site which submission changed, so the campaigns' sweeps list
a study's submissions only when something in it changed, plus a bounded catch-up poll.

Three parts:

- `ensure_subscription` (at start, when Prolific can reach the task site): the workspace's signing
  secret read from Prolific (created only if it has none: creating one replaces it), and one
  subscription to `submission.status.change` for the task site's hook URL, journaled in the store
  (`prolific_hooks`) before the create call, confirmed with the `X-Hook-Secret` of its creation; the
  ones it journaled for an earlier URL (an earlier start's port) are deleted. The secret lives in
  memory only (`HookReceiver.arm`): never in the store, a log, an event or an export.
- `HookReceiver` (the task site's `POST /prolific/hooks`): a delivery is accepted only when it carries
  a timestamp no older (or newer) than `MAX_AGE` seconds and a signature that is base64(HMAC-SHA256(
  secret, timestamp + body)), compared in constant time; an unsigned, forged, stale or replayed one is
  answered 4xx and changes nothing. The body is read under `campaign.untrusted`'s rules and bounded in
  size. A good one only *marks* which submission changed (`prolific_hook_marks`): a hook never decides,
  pays or releases anything by itself.
- `StudyWatch` (one per campaign, in `ProlificStudies.submissions_of`): the last listing of each study
  is kept and used again until a mark names one of its submissions (or a submission it has not seen:
  then every study of the campaign is listed again), until `catch_up` seconds of the service's clock
  have passed since it was listed (a lost hook is still caught), or when the caller needs it fresh.
  At start (and so at every resume) nothing is cached: every study is listed once.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, func, select

from campaign.prolific.emulator.hooks import (
    EVENT_ID_HEADER,
    SIGNATURE_HEADER,
    SUBMISSION_STATUS_CHANGE,
    TIMESTAMP_HEADER,
    sign,
)
from campaign.store import ProlificHookMarkRow, ProlificHookRow, Store
from campaign.untrusted import Refused, check_text, loads_json_object

log = logging.getLogger(__name__)
HOOK_PATH = "/prolific/hooks"
MAX_AGE = 300.0  # seconds a signed timestamp stays good, either way (clock skew, a slow delivery)
MAX_BODY = 16 * 1024  # a submission.status.change event is a few hundred bytes
CATCH_UP = 900.0  # seconds of the service's clock between listings of a study that got no hook
KEEP_MARKS = 7 * 86400.0  # seconds a mark is kept
PRUNE_EVERY = 500  # marks accepted between two prunings
ID_RE = re.compile(r"^[0-9a-f]{24}$")
EVENT_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")
STATE_INTENT, STATE_CREATED, STATE_CONFIRMED = "intent", "created", "confirmed"


def hook_url(public_url: str) -> str:
    """Where Prolific sends the task site's hooks."""
    return public_url.rstrip("/") + HOOK_PATH


def _header(headers: Mapping[str, str], name: str) -> str | None:
    lower = name.lower()
    return next((v for k, v in headers.items() if k.lower() == lower), None)


class HookReceiver:
    """Verifies and marks webhook deliveries (see the module docstring). `now` is the clock Prolific
    signs with (the run's clock for the emulator, wall time for Prolific); `study_of(submission)` is
    the study the task site knows a submission from, if any."""

    def __init__(self, store: Store, now: Callable[[], float], *, max_age: float = MAX_AGE,
                 study_of: Callable[[str], str | None] | None = None, changed: Callable[[str], None] | None = None) -> None:
        """`changed(submission)` is told of every verified delivery (the door's gate forgets what it
        remembered of that session)."""
        self.store = store
        self.now = now
        self.max_age = max_age
        self.study_of = study_of
        self.changed = changed
        self._secret: str | None = None  # in memory only
        self.accepted = 0
        self.refused = 0

    def __repr__(self) -> str:
        return f"HookReceiver(armed={self.armed})"  # the secret is never shown

    def arm(self, secret: str) -> None:
        self._secret = secret

    @property
    def armed(self) -> bool:
        return bool(self._secret)

    def receive(self, headers: Mapping[str, str], body: bytes) -> tuple[int, str]:
        """(HTTP status, a short reason safe to answer with). Only a 200 may have marked something."""
        status, reason = self._receive(headers, body)
        if status >= 400:
            self.refused += 1
            log.info("webhook refused (%s): %s", status, reason)
        return status, reason

    def _receive(self, headers: Mapping[str, str], body: bytes) -> tuple[int, str]:
        if not self._secret:
            return 503, "not ready for webhooks yet"
        if len(body) > MAX_BODY:
            return 413, "body too large"
        signature, stamp = _header(headers, SIGNATURE_HEADER), _header(headers, TIMESTAMP_HEADER)
        if not signature or not stamp:
            return 401, "unsigned"
        if not stamp.isdigit() or len(stamp) > 12:
            return 400, "bad timestamp"
        if abs(self.now() - int(stamp)) > self.max_age:
            return 401, "stale timestamp"
        if not hmac.compare_digest(signature.strip().encode("ascii", "replace"), sign(self._secret, stamp, body).encode("ascii")):
            return 401, "bad signature"
        try:
            event = loads_json_object(body, "the webhook body")
        except Refused as exc:
            return 400, str(exc)
        if event.get("event_type") != SUBMISSION_STATUS_CHANGE:
            return 200, "ignored: not a submission status change"
        sub, status = event.get("resource_id"), event.get("status")
        if not isinstance(sub, str) or not ID_RE.match(sub) or not isinstance(status, str) or not 0 < len(status) <= 40:
            return 400, "resource_id and status are required"
        try:
            check_text(status, "status")
        except Refused as exc:
            return 400, str(exc)
        given = _header(headers, EVENT_ID_HEADER)
        event_id = given if given and EVENT_ID_RE.match(given) else "h:" + hashlib.sha256(body).hexdigest()[:40]
        study = self.study_of(sub) if self.study_of is not None else None
        if self.changed is not None:
            self.changed(sub)
        try:
            with self.store.session() as s:
                s.add(ProlificHookMarkRow(event_id=event_id, submission_id=sub, study_id=study, status=status,
                                          sent_at=int(stamp), received_at=self.now()))
        except IntegrityError:
            with self.store.session() as s:
                seen = s.exec(select(ProlificHookMarkRow.sent_at).where(ProlificHookMarkRow.event_id == event_id)).first()
            if seen is not None and int(seen) == int(stamp):
                return 409, "replayed"  # the same signed request again
            return 200, "already received"  # Prolific sending an event again, signed anew: nothing more to mark
        self.accepted += 1
        if self.accepted % PRUNE_EVERY == 0:
            self._prune()
        return 200, "marked"

    def _prune(self) -> None:
        """Drop marks older than `KEEP_MARKS`: every sweep has listed its studies since (the catch-up poll),
        and a replay that old is refused for its timestamp anyway."""
        with self.store.session() as s:
            s.execute(delete(ProlificHookMarkRow).where(col(ProlificHookMarkRow.received_at) < self.now() - KEEP_MARKS))


def ensure_subscription(api: Any, store: Store, workspace_id: str, target_url: str,
                        event_type: str = SUBMISSION_STATUS_CHANGE) -> str:
    """The workspace's signing secret, with an enabled subscription of `target_url` to `event_type`
    (found again from the journal, adopted from Prolific, or created and confirmed). A crash between the
    journal's intent and the create call's record leaves at most an unconfirmed subscription, which the
    next start deletes before creating another. Then the subscriptions this store journaled for another
    URL of the same workspace and event are deleted (`drop_stale_subscriptions`)."""
    secret = _ensure_current(api, store, workspace_id, target_url, event_type)
    drop_stale_subscriptions(api, store, workspace_id, target_url, event_type)
    return secret


def drop_stale_subscriptions(api: Any, store: Store, workspace_id: str, target_url: str,
                             event_type: str = SUBMISSION_STATUS_CHANGE) -> int:
    """Deletes, on Prolific and then from the journal, every subscription this store made for the same
    workspace and event but another target URL; returns how many journal rows went.

    Why: the built-in task site listens on a new port at each start unless told one, so every restart
    subscribed anew and the old subscriptions stayed. Prolific went on sending each event to every dead URL
    and retrying it (the emulator after 25 restarts of the hostile demo: 16 subscriptions, 10,379 events,
    1,021 retries pending, a daemon at full CPU delivering them). Only journaled subscriptions are touched:
    another tool's, in the same workspace, are not this store's to delete. Every daemon of a shared store
    marks what its hooks say in that store (`HookReceiver`), so dropping another daemon's URL loses no
    mark while this one's subscription lives, and that daemon subscribes again when it starts. A delete that
    fails for another reason than "not found" keeps the row, to be tried at the next start; it never stops
    this one."""
    with store.session() as s:
        stale = [(r.id, r.target_url, r.subscription_id, r.state) for r in s.exec(select(ProlificHookRow).where(
            ProlificHookRow.workspace_id == workspace_id, ProlificHookRow.event_type == event_type,
            ProlificHookRow.target_url != target_url)).all()]
    listed: list[dict[str, Any]] | None = None
    dropped = 0
    for row_id, url, sub_id, state in stale:
        ids = {sub_id} if sub_id else set()
        try:
            if state != STATE_CONFIRMED:  # a crash may have left one created on Prolific before its id was recorded
                if listed is None:
                    listed = [*api.subscriptions(workspace_id, enabled=True), *api.subscriptions(workspace_id, enabled=False)]
                ids |= {str(sub["id"]) for sub in listed if sub.get("target_url") == url and sub.get("event_type") == event_type}
            for sid in sorted(ids):
                try:
                    api.delete_subscription(sid)
                except Exception as exc:  # noqa: BLE001 - gone already is what we want; anything else: next start
                    if int(getattr(exc, "status", 0) or 0) != 404:
                        raise
        except Exception as exc:  # noqa: BLE001 - the hooks of this start do not depend on it
            log.warning("an old webhook subscription (to %s) could not be deleted; trying again at the next start: %s",
                        url, exc)
            continue
        with store.session() as s:
            s.execute(delete(ProlificHookRow).where(col(ProlificHookRow.id) == row_id))
        dropped += 1
    return dropped


def _ensure_current(api: Any, store: Store, workspace_id: str, target_url: str, event_type: str) -> str:
    """`ensure_subscription` for `target_url` itself."""
    secret = next((str(s["value"]) for s in api.hook_secrets(workspace_id) if s.get("value")), None)
    if secret is None:
        secret = str(api.create_hook_secret(workspace_id)["value"])
    where = (ProlificHookRow.workspace_id == workspace_id, ProlificHookRow.event_type == event_type,
             ProlificHookRow.target_url == target_url)
    with store.session() as s:
        row = s.exec(select(ProlificHookRow).where(*where)).first()
        fresh = row is None
        if fresh:
            s.add(ProlificHookRow(workspace_id=workspace_id, event_type=event_type, target_url=target_url, state=STATE_INTENT))

    def record(**values: Any) -> None:
        with store.session() as s:
            found = s.exec(select(ProlificHookRow).where(*where)).one()
            for k, v in values.items():
                setattr(found, k, v)
            s.add(found)

    if row is not None and row.state == STATE_CONFIRMED and row.subscription_id:
        try:
            known = api.subscription(row.subscription_id)
        except Exception as exc:  # noqa: BLE001 - deleted on Prolific (an error answer): subscribe again below
            if int(getattr(exc, "status", 0) or 0) in (0, 429) or int(getattr(exc, "status", 0) or 0) >= 500:
                raise
            known = None
        if known is not None and known.get("target_url") == target_url and known.get("event_type") == event_type:
            if not known.get("is_enabled"):
                api.update_subscription(row.subscription_id, is_enabled=True)
            return secret
    elif not fresh:  # an intent or an unconfirmed subscription a crash left: adopt an enabled one, drop the rest
        for sub in api.subscriptions(workspace_id, enabled=True):
            if sub.get("target_url") == target_url and sub.get("event_type") == event_type:
                record(subscription_id=str(sub["id"]), state=STATE_CONFIRMED)
                return secret
        for sub in api.subscriptions(workspace_id, enabled=False):
            if sub.get("target_url") == target_url and sub.get("event_type") == event_type:
                api.delete_subscription(str(sub["id"]))
    record(subscription_id=None, state=STATE_INTENT)
    created, confirm = api.create_subscription(workspace_id, event_type, target_url)
    record(subscription_id=str(created["id"]), state=STATE_CREATED)
    api.confirm_subscription(str(created["id"]), confirm)
    record(state=STATE_CONFIRMED)
    return secret


class StudyWatch:
    """Which studies of one campaign must be listed again (see the module docstring)."""

    def __init__(self, store: Store, now: Callable[[], float], *, catch_up: float = CATCH_UP) -> None:
        self.store = store
        self.now = now
        self.catch_up = catch_up
        self._cache: dict[str, list[dict[str, Any]]] = {}
        self._listed_at: dict[str, float] = {}
        self._where: dict[str, str] = {}  # submission -> study, from the listings
        self._dirty: set[str] = set()
        with store.session() as s:  # marks from before this start are covered by the first listings
            self._cursor = int(s.exec(select(func.coalesce(func.max(ProlificHookMarkRow.id), 0))).one() or 0)
        self.listings = 0  # how many listings were fetched
        self.reused = 0  # how many were answered from the last listing

    def _read_marks(self) -> None:
        with self.store.session() as s:
            rows = s.exec(select(ProlificHookMarkRow.id, ProlificHookMarkRow.submission_id, ProlificHookMarkRow.study_id)
                          .where(col(ProlificHookMarkRow.id) > self._cursor).order_by(col(ProlificHookMarkRow.id))).all()
        for mark_id, sub, study in rows:
            self._cursor = max(self._cursor, int(mark_id or 0))
            known = study if study in self._cache else self._where.get(str(sub))
            if known is not None:
                self._dirty.add(known)
            elif study is None:  # a submission none of the listings had (a new one, or another campaign's)
                self._dirty |= set(self._cache)

    def listing(self, study_id: str, fetch: Callable[[], list[dict[str, Any]]], *, fresh: bool = False) -> list[dict[str, Any]]:
        """The study's submissions: fetched when needed, else the last listing."""
        self._read_marks()
        now = self.now()
        if (fresh or study_id not in self._cache or study_id in self._dirty
                or now - self._listed_at.get(study_id, now) >= self.catch_up):
            rows = fetch()
            self._dirty.discard(study_id)
            self._cache[study_id] = rows
            self._listed_at[study_id] = now
            for r in rows:
                self._where[str(r.get("id"))] = study_id
            self.listings += 1
            return rows
        self.reused += 1
        return self._cache[study_id]
