"""Requests handed to an application in this process, without a socket: for a simulated run on virtual
time, where the daemon, the marketplace and the crowd share one process and one thread anyway.

The request is exactly what the client would have sent (signed by boto3, with the worker's session
cookie and CSRF token), and the application answers it through the same `handle` as over HTTP, so
authentication, validation and error shapes are all exercised; only the socket, the HTTP parser and the
hop to the server's thread are left out, which in a simulation are most of a request's cost.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import Any

from campaign.web.request import Application, Refusal, Request, RequestHeaders, Response

Transport = Callable[[str, str, list[tuple[str, str]], bytes], Response]


def transport(app: Application, url: str) -> Transport:
    """`send(method, target, headers, body)` answering as `app` would behind the server at `url`."""
    parts = urllib.parse.urlsplit(url)
    host, port = parts.netloc, parts.port or 80

    def send(method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> Response:
        path, _, query = target.partition("?")
        items = [(k, v) for k, v in headers if k.lower() not in ("host", "content-length")]
        items += [("Host", host), ("Content-Length", str(len(body)))]
        if len(body) > app.max_body:
            return app.refuse(method, path, Refusal(413, "RequestEntityTooLarge", f"The body is larger than {app.max_body} bytes."))
        request = Request(method, path or "/", query, RequestHeaders(items), body, "127.0.0.1", port)
        try:
            return app.handle(request)
        except Exception as exc:  # noqa: BLE001 - as the server does: a failing request is a 500, not a crash
            return app.refuse(method, path, Refusal(500, "InternalError", type(exc).__name__))

    return send


class _Body:
    """What botocore reads a response's body from (`AWSResponse.raw.stream()`)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Any:
        yield self.data


def attach_to_boto3(client: Any, app: Application, url: str) -> None:
    """Send every request of the boto3 `client` to `app` in this process (botocore's `before-send` hook:
    the request is built and signed as for the network, and its answer parsed as if it came from there)."""
    from botocore.awsrequest import AWSResponse  # type: ignore[import-untyped]

    send = transport(app, url)

    def before_send(request: Any, **_: Any) -> Any:
        parts = urllib.parse.urlsplit(request.url)
        body = request.body or b""
        if isinstance(body, str):
            body = body.encode("utf-8")
        elif not isinstance(body, bytes):
            body = body.read()
        headers = [(k, v.decode("latin-1") if isinstance(v, bytes) else str(v)) for k, v in request.headers.items()]
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        resp = send(request.method, target, headers, body)
        out = dict(resp.headers)
        if resp.content_type:
            out["Content-Type"] = resp.content_type
        return AWSResponse(request.url, resp.status, out, _Body(resp.body))

    client.meta.events.register("before-send", before_send)


# -- routes: in a simulation, the urllib-based clients (Prolific API, participants, the task site's door)
# reach the applications of this process by their URL's origin

_routes: dict[str, Transport] = {}


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def add_route(url: str, app: Application) -> None:
    """Requests to `url`'s origin go to `app` in this process (`open_url`) until `clear_routes`."""
    _routes[_origin(url)] = transport(app, url)


def clear_routes() -> None:
    _routes.clear()


def open_url(method: str, url: str, headers: dict[str, str], body: bytes | None,
             timeout: float) -> tuple[int, dict[str, str], bytes]:
    """(status, headers with lower-case names, body) of one request: through a route of this process where
    one is installed, else over HTTP; an error status is returned, not raised, so callers treat both alike."""
    import urllib.error
    import urllib.request

    send = _routes.get(_origin(url)) if _routes else None
    if send is not None:
        parts = urllib.parse.urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        answer = send(method, target, list(headers.items()), body or b"")
        return answer.status, {k.lower(): v for k, v in answer.headers.items()}, answer.body
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status), {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), {k.lower(): v for k, v in (exc.headers or {}).items()}, exc.read()
