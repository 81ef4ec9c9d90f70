"""HTTP client for the marketplace's worker interface: what a simulated worker's browser would do.

One keep-alive connection per thread (http.client), because the simulated crowd makes thousands of
small requests and a new TCP connection each time would dominate.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from typing import Any


class WorkerAPIError(Exception):
    """The marketplace refused: `code` is its error code (DoesNotMeetRequirements, Blocked, NoAvailableSlot, ...)."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


class WorkerClient:
    def __init__(self, base_url: str, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
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
                 content_type: str | None = None) -> tuple[int, str, bytes]:
        headers = {"Content-Type": content_type} if content_type else {}
        for attempt in (0, 1):
            conn = self._conn()
            try:
                conn.request(method, self._prefix + path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self._local.err = resp.getheader("X-Error-Code", "")
                return resp.status, resp.getheader("Content-Type", ""), data
            except (http.client.HTTPException, ConnectionError, BrokenPipeError):
                conn.close()
                self._local.conn = None
                if attempt:  # a stale keep-alive connection is retried once on a fresh one
                    raise
        raise AssertionError("unreachable")

    def _json(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        body = json.dumps(payload).encode() if payload is not None else None
        status, _, data = self._request(method, path, body, "application/json" if body is not None else None)
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
    def register(self, worker_id: str, country: str = "US", approval: int = 99, approved: int = 5000,
                 masters: bool = False) -> dict[str, Any]:
        return self._json("POST", "/worker/api/register", {
            "WorkerId": worker_id, "Locale": {"Country": country}, "PercentAssignmentsApproved": approval,
            "NumberHITsApproved": approved, "Masters": masters})

    def available(self, worker_id: str, max: int = 100) -> list[dict[str, Any]]:  # noqa: A002 - the contract's name
        q = urllib.parse.urlencode({"workerId": worker_id, "max": max})
        return self._json("GET", f"/worker/api/hits?{q}")["HITs"]

    def accept(self, worker_id: str, hit_id: str) -> dict[str, Any]:
        return self._json("POST", "/worker/api/accept", {"WorkerId": worker_id, "HITId": hit_id})

    def task_html(self, assignment_id: str) -> str:
        q = urllib.parse.urlencode({"assignmentId": assignment_id})
        status, _, data = self._request("GET", f"/worker/api/task?{q}")
        if status >= 400 and self._local.err:
            raise WorkerAPIError(self._local.err, data.decode("utf-8", "replace")[:500], status)
        return self._check(status, data, json_body=False).decode("utf-8")

    def submit(self, assignment_id: str, fields: list[tuple[str, str]]) -> None:
        """Posts as a browser form does; the assignmentId field gets the accepted assignment's id (as MTurk's
        frame script fills it in)."""
        posted = [("assignmentId", assignment_id)] + [(k, v) for k, v in fields if k != "assignmentId"]
        body = urllib.parse.urlencode(posted).encode("ascii")
        status, _, data = self._request("POST", "/mturk/externalSubmit", body, "application/x-www-form-urlencoded")
        code = self._local.err
        if status >= 400:
            raise WorkerAPIError(code or f"HTTP{status}", data.decode("utf-8", "replace")[:500], status)

    def return_assignment(self, assignment_id: str) -> None:
        self._json("POST", "/worker/api/return", {"AssignmentId": assignment_id})

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
