"""The Prolific emulator's HTTP server: the researcher API under `/api/v1/` as real clients call it, and a
participant side channel under `/emulator/` that the simulated crowd uses the way a person uses
Prolific's web app (find a study, start it, land on the study URL, come back with a completion code).

Transport as the reference describes it: `Authorization: Token ...` on every research call (401 without),
trailing slash optional, JSON bodies on any verb, every error wrapped in `{"error": {...}}`, each
operation's status as the description lists it (a study's DELETE: 200 and `{}`; a group's, a filter
set's, a draft's within its project, and the messages: 204 with an empty body), list envelopes with
`results`, `_links` and `meta.count`, both `page`/`page_size` and `limit`/`offset` honoured. The
participant side channel may also write to a study's researcher (`POST /emulator/messages`). Tokens
are stored hashed and never logged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from campaign.clock import Clock, WallClock
from campaign.filemodes import private_dir
from campaign.prolific.emulator.engine import ApiError, Emulator
from campaign.prolific.emulator.hooks import HookDelivery
from campaign.prolific.emulator.store import DocStore
from campaign.untrusted import Refused, loads_json
from campaign.web.request import Refusal, Response
from campaign.web.request import Request as WebRequest
from campaign.web.server import Limits, RunningServer, listen

MAX_BODY = 1 << 20
LOOPBACK = {"127.0.0.1", "::1"}
Route = tuple[str, re.Pattern[str], Callable[..., Any]]


class Request:
    def __init__(self, method: str, path: str, query: dict[str, str], body: Any, headers: Any, client: str) -> None:
        self.method, self.path, self.query, self.body, self.headers, self.client = method, path, query, body, headers, client


def _page(rows: list[Any], query: dict[str, str], base: str) -> dict[str, Any]:
    """Prolific's list envelope; everything on one page unless the client asks for pages."""
    total = len(rows)
    if "page_size" in query or "page" in query:
        size = max(1, min(int(query.get("page_size") or 20), 500))
        page = max(1, int(query.get("page") or 1))
        start = (page - 1) * size
        nxt = f"{base}?page={page + 1}&page_size={size}" if start + size < total else None
        prev = f"{base}?page={page - 1}&page_size={size}" if page > 1 else None
    elif "limit" in query or "offset" in query:
        size = max(1, min(int(query.get("limit") or 100), 1000))
        start = max(0, int(query.get("offset") or 0))
        nxt = f"{base}?limit={size}&offset={start + size}" if start + size < total else None
        prev = f"{base}?limit={size}&offset={max(0, start - size)}" if start > 0 else None
    else:
        size, start, nxt, prev = max(total, 1), 0, None, None
    return {"results": rows[start:start + size],
            "_links": {"self": {"href": base, "title": "Current"}, "next": {"href": nxt, "title": "Next"},
                       "previous": {"href": prev, "title": "Previous"}, "last": {"href": base, "title": "Last"}},
            "meta": {"count": total}}


def _gone(delete: Callable[[dict[str, Any], str], object], user: dict[str, Any], doc_id: str) -> tuple[int, None]:
    delete(user, doc_id)
    return 204, None


def build_routes(em: Emulator) -> list[Route]:
    """(method, path pattern, handler(request, user, *groups)) for the research API."""
    r: list[Route] = []

    def add(method: str, pattern: str, fn: Callable[..., Any]) -> None:
        r.append((method, re.compile("^" + pattern + "/?$"), fn))

    hx = "([0-9a-f]{24})"
    add("GET", "users/me", lambda q, u: em.me(u))
    add("GET", "workspaces", lambda q, u: _page(em.workspaces(u), q.query, q.path))
    add("POST", "workspaces", lambda q, u: (201, em.create_workspace(u, q.body)))
    add("GET", f"workspaces/{hx}", lambda q, u, w: em.get_workspace(u, w))
    add("PATCH", f"workspaces/{hx}", lambda q, u, w: em.update_workspace(u, w, q.body))
    add("GET", f"workspaces/{hx}/balance", lambda q, u, w: em.balance(u, w))
    add("GET", f"workspaces/{hx}/projects", lambda q, u, w: _page(em.projects(u, w), q.query, q.path))
    add("POST", f"workspaces/{hx}/projects", lambda q, u, w: (201, em.create_project(u, w, q.body)))
    add("GET", f"projects/{hx}", lambda q, u, p: em.project_out(em.project(u, p)))
    add("PATCH", f"projects/{hx}", lambda q, u, p: em.update_project(u, p, q.body))
    add("GET", f"projects/{hx}/studies",
        lambda q, u, p: _page([s for s in em.list_studies(u, q.query) if s["project"] == em.project(u, p)["id"]], q.query, q.path))
    add("DELETE", f"projects/{hx}/studies/{hx}", lambda q, u, p, s: _gone(em.delete_study, u, s))
    add("GET", "studies", lambda q, u: _page(em.list_studies(u, q.query), q.query, q.path))
    add("POST", "studies", lambda q, u: (201, em.create_study(u, q.body)))
    add("GET", f"studies/{hx}", lambda q, u, s: em.study_out(em.study(u, s)))
    add("PATCH", f"studies/{hx}", lambda q, u, s: em.update_study(u, s, q.body))
    add("DELETE", f"studies/{hx}", lambda q, u, s: em.delete_study(u, s))  # 200 and {}, as described
    add("POST", f"studies/{hx}/transition", lambda q, u, s: em.transition_study(u, s, q.body))
    add("GET", f"studies/{hx}/submissions", lambda q, u, s: _page(em.list_submissions(u, s, q.query), q.query, q.path))
    add("GET", f"studies/{hx}/submissions/counts", lambda q, u, s: em.counts(u, s))
    add("GET", f"studies/{hx}/cost", lambda q, u, s: em.study_cost(u, s))
    add("POST", "study-cost-calculator", lambda q, u: em.cost_calculator(q.body))
    add("GET", "submissions", lambda q, u: _page(em.list_submissions(u, q.query.get("study"), q.query), q.query, q.path))
    add("POST", "submissions/bulk-approve", lambda q, u: em.bulk_approve(u, q.body))
    add("POST", "submissions/bonus-payments", lambda q, u: (201, em.create_bonus(u, q.body)))
    add("GET", f"submissions/{hx}", lambda q, u, s: em.submission_out(em.submission(u, s)))
    add("POST", f"submissions/{hx}/transition", lambda q, u, s: em.transition_submission(u, s, q.body))
    add("POST", f"submissions/{hx}/request-return", lambda q, u, s: em.request_return(u, s, q.body))
    add("POST", f"bulk-bonus-payments/{hx}/pay", lambda q, u, b: (202, em.pay_bonus(u, b)))
    add("GET", "participant-groups", lambda q, u: _page(em.list_groups(u, q.query), q.query, q.path))
    add("POST", "participant-groups", lambda q, u: (201, em.create_group(u, q.body)))
    add("GET", f"participant-groups/{hx}", lambda q, u, g: em.group_out(em.group(u, g)))
    add("PATCH", f"participant-groups/{hx}", lambda q, u, g: em.update_group(u, g, q.body))
    add("DELETE", f"participant-groups/{hx}", lambda q, u, g: _gone(em.delete_group, u, g))
    for verb in ("GET", "POST", "DELETE"):
        add(verb, f"participant-groups/{hx}/participants",
            lambda q, u, g: _page(em.group_members(u, g, q.method, q.body), q.query, q.path))
    add("GET", "filters", lambda q, u: _page(em.filter_listing(u, q.query), q.query, q.path))
    add("POST", "eligibility-count", lambda q, u: em.eligibility_count(u, q.body))
    add("GET", "filter-sets", lambda q, u: {"results": em.list_filter_sets(u, q.query)})
    add("POST", "filter-sets", lambda q, u: (201, em.create_filter_set(u, q.body)))
    add("GET", f"filter-sets/{hx}", lambda q, u, f: em.get_filter_set(u, f, q.query))
    add("PATCH", f"filter-sets/{hx}", lambda q, u, f: em.update_filter_set(u, f, q.body))
    add("DELETE", f"filter-sets/{hx}", lambda q, u, f: _gone(em.delete_filter_set, u, f))
    add("POST", f"filter-sets/{hx}/clone", lambda q, u, f: (201, em.clone_filter_set(u, f, q.body)))
    add("POST", f"filter-sets/{hx}/lock", lambda q, u, f: em.lock_filter_set(u, f, True))
    add("POST", f"filter-sets/{hx}/unlock", lambda q, u, f: em.lock_filter_set(u, f, False))
    add("POST", "messages", lambda q, u: _none(em.send_messages, u, q.body))
    add("POST", "messages/bulk", lambda q, u: _none(em.send_bulk_messages, u, q.body))
    add("POST", "messages/participant-group", lambda q, u: _none(em.send_group_message, u, q.body))
    add("GET", "messages", lambda q, u: {"results": em.list_messages(u, q.query)})
    add("GET", "messages/unread", lambda q, u: {"results": em.list_messages(u, q.query, unread=True)})
    add("POST", "invitations", lambda q, u: (201, em.invite(u, q.body)))
    add("GET", "hooks/event-types", lambda q, u: em.event_types())
    add("GET", "hooks/secrets", lambda q, u: em.list_secrets(u, q.query))
    add("POST", "hooks/secrets", lambda q, u: (201, em.create_secret(u, q.body)))
    add("GET", "hooks/subscriptions", lambda q, u: em.list_subscriptions(u, q.query))
    add("POST", "hooks/subscriptions", lambda q, u: em.create_subscription(u, q.body))
    add("GET", f"hooks/subscriptions/{hx}", lambda q, u, h: em.get_subscription(u, h))
    add("POST", f"hooks/subscriptions/{hx}", lambda q, u, h: em.confirm_subscription(u, h, q.body))
    add("PATCH", f"hooks/subscriptions/{hx}", lambda q, u, h: em.update_subscription(u, h, q.body))
    add("DELETE", f"hooks/subscriptions/{hx}", lambda q, u, h: _gone(em.delete_subscription, u, h))
    add("GET", f"hooks/subscriptions/{hx}/events",
        lambda q, u, h: _page(em.subscription_events(u, h, q.query), q.query, q.path))
    return r


def _none(send: Callable[[dict[str, Any], dict[str, Any]], None], user: dict[str, Any], body: dict[str, Any]) -> tuple[int, None]:
    send(user, body)
    return 204, None


class EmulatorApp:
    """The emulator behind `campaign.web.server`: whole requests in, JSON answers out, no socket here."""

    max_body = MAX_BODY

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator
        self.routes = build_routes(emulator)
        # Called with every request and its answer (the contract tests check them against Prolific's
        # description); an observer must not raise.
        self.observers: list[Callable[[WebRequest, Response], None]] = []

    def refuse(self, method: str, path: str, refusal: Refusal) -> Response:
        """Requests refused at the door get Prolific's error envelope, like every other error."""
        status = refusal.status if refusal.status != 413 else 400
        message = "The request body is too large." if refusal.status == 413 else refusal.message
        return _json(status, ApiError(status, message).body(), close=True)

    def handle(self, request: WebRequest) -> Response:
        try:
            req = Request(request.method, request.path, request.query_dict(), read_json_body(request.body),
                          request.headers, request.client)
            status, payload, headers = self._route(req)
        except ApiError as exc:
            status, payload, headers = exc.status, exc.body(), {}
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:  # OverflowError: float(10**4000)
            status, payload, headers = 400, ApiError(400, f"Malformed request ({type(exc).__name__}).").body(), {}
        response = _json(status, payload)
        response.headers.update(headers)
        for observe in self.observers:
            observe(request, response)
        return response

    def _route(self, req: Request) -> tuple[int, Any, dict[str, str]]:
        em = self.emulator
        with em.db.transaction():
            em.sweep()
            if req.path.startswith("/emulator/"):
                return (*_participant_side(em, req), {})
            if not req.path.startswith("/api/v1/"):
                raise ApiError(404, "Not found.")
            rel = req.path[len("/api/v1/"):]
            user = em.authenticate(req.headers.get("Authorization"))
            matched_path = False
            for method, pattern, fn in self.routes:
                m = pattern.match(rel)
                if m is None:
                    continue
                matched_path = True
                if method != req.method:
                    continue
                if req.method in ("POST", "PATCH") and not isinstance(req.body, dict):
                    raise ApiError(400, "Expected a JSON object.")
                result = fn(req, user, *m.groups())
                if isinstance(result, tuple):  # (status, answer) or (status, answer, headers)
                    return result[0], result[1], (result[2] if len(result) > 2 else {})
                return 200, result, {}
            raise ApiError(405 if matched_path else 404, "Method not allowed." if matched_path else "Not found.")


def _json(status: int, payload: Any, close: bool = False) -> Response:
    if status == 204:
        return Response(204, None, b"", close=close)
    return Response(status, "application/json", json.dumps(payload).encode("utf-8"), close=close)


def read_json_body(data: bytes) -> Any:
    """A request body as JSON under `campaign.untrusted`'s rules (UTF-8, bounded depth, finite numbers,
    no lone surrogate); empty is `{}`; anything else is a 400 `ApiError`, never another exception."""
    if not data.strip():
        return {}
    try:
        return loads_json(data, "the request body")
    except Refused as exc:
        raise ApiError(400, f"The request body is not valid JSON: {exc}") from None


def _participant_side(em: Emulator, req: Request) -> tuple[int, Any]:
    """What Prolific's web app does for a participant; authenticated as `Participant <id>:<secret>`."""
    parts = req.path.strip("/").split("/")[1:]
    if parts == ["participants"] and req.method == "POST":
        # Only the operator adds participants: the research token of a loopback caller.
        if req.client not in LOOPBACK:
            raise ApiError(403, "Participants are added from the emulator's own machine.")
        em.authenticate(req.headers.get("Authorization"))
        b = req.body if isinstance(req.body, dict) else {}
        ext = b.get("external_id")
        if ext is not None and (not isinstance(ext, str) or not 0 < len(ext) <= 200):
            raise ApiError(400, {"external_id": ["external_id must be a string of 1 to 200 characters."]})
        known = ext is not None and em.db.get("participant_ref", ext) is not None
        pid, secret = em.add_participant(country=str(b.get("country", "US")), approval_rate=float(b.get("approval_rate", 99)),
                                         approvals=int(b.get("approvals", 100)), languages=tuple(b.get("languages", ["English"])),
                                         age=int(b.get("age", 30)), external_id=ext)
        return (200 if known else 201), {"id": pid, "secret": secret, "external_id": ext, "created": not known}
    auth = req.headers.get("Authorization") or ""
    pid, _, secret = auth[len("Participant "):].partition(":") if auth.startswith("Participant ") else ("", "", "")
    p = em.participant(pid, secret)
    if parts == ["studies"] and req.method == "GET":
        return 200, {"results": em.open_studies(p)}
    if parts == ["messages"] and req.method == "POST":
        em.participant_message(p, req.body if isinstance(req.body, dict) else {})
        return 204, None
    if len(parts) == 3 and parts[0] == "studies" and parts[2] == "start" and req.method == "POST":
        return 201, em.start(p, parts[1])
    if parts == ["submissions"] and req.method == "GET":
        return 200, {"results": em.my_submissions(p)}
    if len(parts) == 2 and parts[0] == "submissions" and req.method == "GET":
        return 200, em.my_submission(p, parts[1])
    if len(parts) == 3 and parts[0] == "submissions" and req.method == "POST" and parts[2] in ("complete", "return"):
        if parts[2] == "complete":
            code = req.body.get("code") if isinstance(req.body, dict) else None
            return 200, em.complete(p, parts[1], code if isinstance(code, str) else None)
        return 200, em.return_submission(p, parts[1])
    raise ApiError(404, "Not found.")


class RunningEmulator:
    """An emulator serving on its own server thread. `base_url` ends in `/api/v1/` as clients expect."""

    def __init__(self, server: RunningServer, app: EmulatorApp, store: DocStore, token: str,
                 hooks: HookDelivery | None = None) -> None:
        self.server, self.app, self.store = server, app, store
        self.hooks = hooks or HookDelivery(app.emulator)  # webhook deliveries: `hooks.step()`, or `hooks.start()`
        host, port = server.address()
        self.root_url = f"http://{host}:{port}"
        self.base_url = f"{self.root_url}/api/v1/"
        self.token = token

    @property
    def httpd(self) -> RunningServer:
        """The server (`server_address` is its listening address)."""
        return self.server

    @property
    def emulator(self) -> Emulator:
        return self.app.emulator

    def __repr__(self) -> str:
        return f"RunningEmulator({self.base_url})"  # the token is never shown

    def stop(self) -> None:
        self.hooks.stop()
        self.server.stop()
        self.store.close()

    def __enter__(self) -> RunningEmulator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_emulator(state_dir: Path, clock: Clock | None = None, *, fee_rate: Decimal = Decimal("0.333"),
                   vat_rate: Decimal = Decimal("0"), balance_minor: int = 1_000_000, currency: str = "GBP",
                   host: str = "127.0.0.1", port: int = 0, limits: Limits | None = None,
                   bonus_delay: float = 0.0, deliver_hooks: bool = False) -> RunningEmulator:
    """Start (or resume) an emulator whose state lives in `state_dir/prolific.db`.

    The researcher token is made on first start and kept in `state_dir/token` (mode 0600), the
    emulator's own credentials file, so a restarted emulator accepts the same token.
    `deliver_hooks`: send webhook events from a thread of its own (wall time); otherwise whoever runs the
    emulator calls `RunningEmulator.hooks.step()` (a simulation's timeline, a test).
    """
    state_dir = private_dir(state_dir)
    store = DocStore(state_dir / "prolific.db")
    em = Emulator(store, clock or WallClock(), fee_rate=fee_rate, vat_rate=vat_rate, currency=currency,
                  balance_minor=balance_minor, bonus_delay=bonus_delay)
    token_file = state_dir / "token"
    if token_file.is_file():
        token = token_file.read_text(encoding="utf-8").strip()
    else:
        with store.transaction():
            token = em.add_researcher("researcher")
        token_file.touch(mode=0o600)
        token_file.write_text(token + "\n", encoding="utf-8")
    app = EmulatorApp(em)
    try:
        sock = listen(host, port)
    except OSError:
        store.close()
        raise
    try:
        server = RunningServer({sock: app}, limits or Limits(), name="prolific-emulator", server_name="prolific-emulator")
    except BaseException:
        sock.close()
        store.close()
        raise
    running = RunningEmulator(server, app, store, token)
    if deliver_hooks:
        running.hooks.start()
    return running


if __name__ == "__main__":  # the server knows nothing of the command line above it: say where the command is
    import sys

    print("start the emulator with `campaign prolific serve [--port P] [--state DIR]` (python -m campaign prolific serve)",
          file=sys.stderr)
    raise SystemExit(2)
