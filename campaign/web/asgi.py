"""The ASGI side of an `Application`: read the body whole within its time limit, run `handle` on a worker
thread (the applications are synchronous: SQLite, locks) or, for the requests the application calls
quick (`inline`, see `Application`), on the event loop itself, and send the answer in one piece.

Several listening sockets may share one server (the marketplace's worker and content origins): the
adapter picks the application by the local port a request arrived on.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from campaign.web.request import Application, Refusal, Request, RequestHeaders, Response

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class _Name(bytes):
    """A header name sent with the case the application gave it. HTTP header names are case-insensitive,
    but some clients compare them as written (`dict(resp.getheaders())["Location"]`); uvicorn lowercases
    the names it writes by calling `.lower()` on each, which this type answers with itself. The names
    uvicorn interprets (content-length, connection, transfer-encoding) are always sent as plain bytes."""

    def lower(self) -> bytes:
        return self


_FRAMING = {"content-length", "connection", "transfer-encoding"}
_names: dict[str, bytes] = {}


def header_name(name: str) -> bytes:
    cached = _names.get(name)
    if cached is None:
        low = name.lower()
        cached = low.encode("latin-1") if low in _FRAMING else _Name(name.encode("latin-1"))
        if len(_names) < 256:
            _names[name] = cached
    return cached


_date_cache: tuple[int, bytes] = (0, b"")


def http_date() -> bytes:
    """The Date header's value, formatted once per second rather than once per response."""
    global _date_cache
    now = int(time.time())
    cached = _date_cache
    if cached[0] != now:
        cached = (now, email.utils.formatdate(now, usegmt=True).encode("ascii"))
        _date_cache = cached
    return cached[1]


def encode_headers(response: Response, server_name: bytes, close: bool) -> list[tuple[bytes, bytes]]:
    headers = [(header_name("Server"), server_name), (header_name("Date"), http_date())]
    if response.content_type is not None:
        headers.append((header_name("Content-Type"), response.content_type.encode("latin-1")))
    headers.append((b"content-length", str(len(response.body)).encode("ascii")))
    headers += [(header_name(k), v.encode("latin-1")) for k, v in response.headers.items()]
    if close or response.close:
        headers.append((b"connection", b"close"))
    return headers


class AsgiAdapter:
    """`apps` maps a listening port to its application."""

    def __init__(self, apps: dict[int, Application], pool: ThreadPoolExecutor, server_name: str) -> None:
        self.apps = apps
        self.pool = pool
        self.server_name = server_name.encode("latin-1")

    def app_for(self, port: int) -> Application:
        app = self.apps.get(port)
        if app is None:  # one application: whatever the port
            app = next(iter(self.apps.values()))
        return app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        port = (scope.get("server") or ("", 0))[1] or 0
        app = self.app_for(port)
        method = scope["method"]
        path = scope.get("raw_path") or scope["path"].encode("utf-8")
        target = path.decode("latin-1")
        if target.startswith("//"):  # "//host/x" is an absolute URI to a browser: never echo one back
            target = "/" + target.lstrip("/")
        headers = RequestHeaders([(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]])
        try:
            if scope.get("http_version") not in ("1.0", "1.1"):
                raise Refusal(505, "HTTPVersionNotSupported", f"Invalid HTTP version ({scope.get('http_version')})")
            body = await self._body(app, headers, receive)
        except Refusal as refusal:
            await self._send(send, app.refuse(method, target, refusal), close=True)
            return
        except _Gone:
            return
        client = (scope.get("client") or ("", 0))[0] or ""
        request = Request(method, target, scope.get("query_string", b"").decode("latin-1"), headers, body, client, port)
        inline = getattr(app, "inline", None)
        if inline is not None and inline(request):  # quick and never waiting: no hand-off (a third of a small request's CPU)
            response = _handle(app, request)
        else:
            loop = asyncio.get_running_loop()
            answer = loop.create_future()
            self.pool.submit(_handle_and_settle, loop, answer, app, request)
            response = await answer
        await self._send(send, response, close=False)

    async def _body(self, app: Application, headers: RequestHeaders, receive: Receive) -> bytes:
        """The whole body or a Refusal: never a prefix of it (a short body is not the request)."""
        if headers.get("Transfer-Encoding") is not None:
            raise Refusal(411, "LengthRequired", "Transfer-Encoding is not supported; send Content-Length.")
        raw = headers.get("Content-Length")
        if raw is None:
            return b""
        n = int(raw)  # the parser admits only one Content-Length, made of digits
        if n > app.max_body:
            raise Refusal(413, "RequestEntityTooLarge", f"The body is larger than {app.max_body} bytes.")
        if n == 0:
            return b""
        return await _read_all(receive, n)  # the protocol's body deadline ends a body that trickles

    async def _send(self, send: Send, response: Response, close: bool) -> None:
        await send({"type": "http.response.start", "status": response.status,
                    "headers": encode_headers(response, self.server_name, close)})
        await send({"type": "http.response.body", "body": response.body, "more_body": False})


class _Gone(Exception):
    """The client went away before its body arrived: nothing to answer."""


async def _read_all(receive: Receive, n: int) -> bytes:
    parts: list[bytes] = []
    got = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Gone
        chunk = message.get("body", b"")
        if chunk:
            parts.append(chunk)
            got += len(chunk)
        if not message.get("more_body", False):
            break
    if got != n:  # the parser frames by Content-Length; a mismatch means the stream ended early
        raise Refusal(400, "IncompleteBody", "The body is shorter than its Content-Length.")
    return b"".join(parts)


def _handle(app: Application, request: Request) -> Response:
    try:
        return app.handle(request)
    except Exception as exc:  # noqa: BLE001 - one bad request must never take the server down
        return app.refuse(request.method, request.path, Refusal(500, "InternalError", type(exc).__name__))


def _handle_and_settle(loop: asyncio.AbstractEventLoop, answer: asyncio.Future[Response], app: Application,
                       request: Request) -> None:
    """On a worker thread: run the application and hand its response to the loop in one call. Cheaper than
    `run_in_executor`, which chains a second future to the pool's and copies its state across."""
    response = _handle(app, request)
    try:
        loop.call_soon_threadsafe(_settle, answer, response)
    except RuntimeError:  # the loop is closed: the server stopped while this request ran
        pass


def _settle(answer: asyncio.Future[Response], response: Response) -> None:
    if not answer.done():  # cancelled when the server shut down under it
        answer.set_result(response)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
