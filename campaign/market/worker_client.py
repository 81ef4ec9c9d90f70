"""HTTP client for the marketplace's worker interface: what a simulated worker's browser would do.

One keep-alive connection per thread (http.client), because the simulated crowd makes thousands of
small requests and a new TCP connection each time would dominate. One client serves many workers: each
signs in once with an operator-issued code and the client keeps that worker's session cookie and CSRF
token, choosing the right one per request (by worker id, or by the assignment it accepted).
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from typing import Any

from campaign.market.operator import Operator, WorkerProfile, in_process
from campaign.web.loopback import Transport


class WorkerAPIError(Exception):
    """The marketplace refused: `code` is its error code (DoesNotMeetRequirements, Blocked, NoAvailableSlot, ...)."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


class WorkerClient:
    def __init__(self, base_url: str, timeout: float = 30.0, operator: Operator | None = None,
                 transport: Transport | None = None) -> None:
        """`operator` adds workers in `register`; by default the operator of a marketplace this process
        started at `base_url` (none for a remote marketplace: sign in with `sign_in(code)` instead).
        `transport` hands each request to the worker site in this process (`campaign.web.loopback`)
        instead of sending it over HTTP."""
        self.base_url = base_url.rstrip("/")
        self.transport = transport
        self.operator = operator
        self._sessions: dict[str, tuple[str, str]] = {}  # worker id -> (cookie value, CSRF token)
        self._owner: dict[str, str] = {}  # assignment id -> worker id
        self._state_lock = threading.Lock()
        parts = urllib.parse.urlsplit(self.base_url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"WorkerClient({self.base_url!r})"

    # -- transport ------------------------------------------------------------------------------------
    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def _request(self, method: str, path: str, body: bytes | None = None,
                 content_type: str | None = None, worker_id: str | None = None) -> tuple[int, str, bytes]:
        headers = {"Content-Type": content_type} if content_type else {}
        sess = self._sessions.get(worker_id or "")
        if sess is not None:
            headers["Cookie"] = f"mkt_session={sess[0]}"
            headers["X-CSRF-Token"] = sess[1]
        if self.transport is not None:
            if content_type is None and body is not None:
                headers["Content-Type"] = "application/octet-stream"
            answer = self.transport(method, self._prefix + path, list(headers.items()), body or b"")
            self._local.err = answer.headers.get("X-Error-Code", "")
            self._local.cookie = answer.headers.get("Set-Cookie", "")
            return answer.status, answer.content_type or "", answer.body
        for attempt in (0, 1):
            conn = self._conn()
            try:
                conn.request(method, self._prefix + path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self._local.err = resp.getheader("X-Error-Code", "")
                self._local.cookie = resp.getheader("Set-Cookie", "")
                return resp.status, resp.getheader("Content-Type", ""), data
            except (http.client.HTTPException, ConnectionError, BrokenPipeError):
                conn.close()
                self._local.conn = None
                if attempt:  # a stale keep-alive connection is retried once on a fresh one
                    raise
        raise AssertionError("unreachable")

    def _json(self, method: str, path: str, payload: dict[str, Any] | None = None, worker_id: str | None = None) -> Any:
        body = json.dumps(payload).encode() if payload is not None else None
        status, _, data = self._request(method, path, body, "application/json" if body is not None else None, worker_id)
        return self._check(status, data, json_body=True)

    @staticmethod
    def _check(status: int, data: bytes, json_body: bool) -> Any:
        if status >= 400:
            try:
                err = json.loads(data.decode("utf-8"))
                raise WorkerAPIError(str(err.get("error", f"HTTP{status}")), str(err.get("message", "")), status)
            except (ValueError, AttributeError):
                raise WorkerAPIError(f"HTTP{status}", data.decode("utf-8", "replace")[:500], status) from None
        return json.loads(data.decode("utf-8")) if json_body else data

    # -- API ------------------------------------------------------------------------------------------
    def sign_in(self, code: str) -> str:
        """Signs in with an operator-issued code; returns the worker id the code belongs to."""
        out = self._json("POST", "/worker/api/signin", {"Code": code})
        cookie = getattr(self._local, "cookie", "") or ""
        token = cookie.split(";", 1)[0].split("=", 1)[1] if cookie.startswith("mkt_session=") else ""
        with self._state_lock:
            self._sessions[out["WorkerId"]] = (token, out["CsrfToken"])
        return str(out["WorkerId"])

    def sessions(self) -> dict[str, tuple[str, str]]:
        """The signed-in workers' (session cookie, CSRF token): a browser's cookie jar, to hand to another
        client of the same workers (another process of a load test, as one person's second tab)."""
        with self._state_lock:
            return dict(self._sessions)

    def adopt_sessions(self, sessions: dict[str, tuple[str, str]]) -> None:
        with self._state_lock:
            self._sessions.update(sessions)

    def register(self, worker_id: str, country: str = "US", approval: int = 99, approved: int = 5000,
                 masters: bool = False) -> dict[str, Any]:
        """Adds the worker through the operator (a worker cannot declare a profile) and signs it in."""
        op = self.operator or in_process(self.base_url)
        if op is None:
            raise WorkerAPIError("NoOperator", f"no operator for {self.base_url}: add the worker with "
                                 "'campaign market worker add' and call sign_in(code)")
        code = op.add_worker(worker_id, WorkerProfile(country=country, approval=approval, approved=approved, masters=masters))
        self.sign_in(code)
        return {"WorkerId": worker_id}

    def _worker_of(self, assignment_id: str) -> str | None:
        wid = self._owner.get(assignment_id)
        if wid is None and len(self._sessions) == 1:
            wid = next(iter(self._sessions))
        return wid

    def available(self, worker_id: str, max: int = 100) -> list[dict[str, Any]]:  # noqa: A002 - the contract's name
        q = urllib.parse.urlencode({"max": max})
        return self._json("GET", f"/worker/api/hits?{q}", worker_id=worker_id)["HITs"]

    def accept(self, worker_id: str, hit_id: str) -> dict[str, Any]:
        out = self._json("POST", "/worker/api/accept", {"HITId": hit_id}, worker_id=worker_id)
        with self._state_lock:
            self._owner[out["AssignmentId"]] = worker_id
        return out

    def preview_html(self, worker_id: str, hit_id: str) -> str:
        """A HIT's source as the worker previews it before accepting (assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE).
        Signed in as that worker: a HIT whose requirements guard Preview is shown to qualified workers only."""
        q = urllib.parse.urlencode({"hitId": hit_id, "assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"})
        status, _, data = self._request("GET", f"/worker/frame?{q}", worker_id=worker_id)
        return self._check(status, data, json_body=False).decode("utf-8")

    def task_html(self, assignment_id: str) -> str:
        q = urllib.parse.urlencode({"assignmentId": assignment_id})
        status, _, data = self._request("GET", f"/worker/api/task?{q}", worker_id=self._worker_of(assignment_id))
        return self._check(status, data, json_body=False).decode("utf-8")

    def submit(self, assignment_id: str, fields: list[tuple[str, str]]) -> None:
        """Posts as a browser form does; the assignmentId field gets the accepted assignment's id (as MTurk's
        frame script fills it in)."""
        posted = [("assignmentId", assignment_id)] + [(k, v) for k, v in fields if k != "assignmentId"]
        body = urllib.parse.urlencode(posted).encode("ascii")
        status, _, data = self._request("POST", "/mturk/externalSubmit", body, "application/x-www-form-urlencoded",
                                        self._worker_of(assignment_id))
        self._check(status, data, json_body=True)
        with self._state_lock:
            self._owner.pop(assignment_id, None)

    def request_qualification(self, worker_id: str, qualification_type_id: str) -> dict[str, Any]:
        return self._json("POST", "/worker/api/request-qualification", {"QualificationTypeId": qualification_type_id},
                          worker_id=worker_id)

    def return_assignment(self, assignment_id: str) -> None:
        self._json("POST", "/worker/api/return", {"AssignmentId": assignment_id}, worker_id=self._worker_of(assignment_id))
        with self._state_lock:
            self._owner.pop(assignment_id, None)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
