"""What an application sees of one HTTP request and what it answers, with no socket in sight.

The marketplace and the emulator are written as `handle(Request) -> Response` (plus `refuse(...)` for
requests the transport rejects before they reach `handle`), so their routing, authentication and error
shapes are tested without a server, and the server library underneath can change without them.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Protocol


class RequestHeaders:
    """A request's header lines as sent, looked up without regard to case (get, get_all, items: the part of
    `http.client.HTTPMessage` the handlers and `auth.verify` use)."""

    __slots__ = ("_items", "_by_name")

    def __init__(self, items: list[tuple[str, str]]) -> None:
        self._items = items
        self._by_name: dict[str, list[str]] = {}
        for name, value in items:
            self._by_name.setdefault(name.lower(), []).append(value)

    def get(self, name: str, failobj: Any = None) -> Any:
        values = self._by_name.get(name.lower())
        return values[0] if values else failobj

    def get_all(self, name: str, failobj: Any = None) -> Any:
        values = self._by_name.get(name.lower())
        return list(values) if values else failobj

    def items(self) -> list[tuple[str, str]]:
        return list(self._items)

    def __getitem__(self, name: str) -> str | None:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._by_name


@dataclass(frozen=True)
class Request:
    """One request whose body has arrived whole. `path` is the raw path (not percent-decoded, as signed by
    SigV4 clients); `query` the raw query string; `client` the peer's address."""

    method: str
    path: str
    query: str
    headers: RequestHeaders
    body: bytes
    client: str
    server_port: int = 0

    def query_dict(self) -> dict[str, str]:
        return dict(urllib.parse.parse_qsl(self.query, keep_blank_values=True))


@dataclass
class Response:
    status: int
    content_type: str | None
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    close: bool = False  # close the connection after this answer


class ResponseLike(Protocol):
    status: int
    content_type: str
    body: bytes
    headers: dict[str, str] | None


class Refusal(Exception):
    """A request refused before the application saw it: bad framing, too large, too slow.

    `code` names the reason for the application's error shape ("InvalidContentLength",
    "LengthRequired", "RequestEntityTooLarge", "IncompleteBody", "RequestTimeout", "BadRequest",
    "HeadersTooLarge")."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class Application(Protocol):
    """What a server runs: `handle` on a worker thread, `refuse` for requests refused at the door (on the
    event loop: it must not block). `max_body` bounds every request body.

    An application may also define `inline(request) -> bool`: True runs `handle` for that request on the
    event loop, without the hand-off to a worker thread and back (for a small call that hand-off cost
    about as much server CPU as the call itself). Only for requests that never wait: while one runs, no
    other connection is served."""

    max_body: int

    def handle(self, request: Request) -> Response: ...

    def refuse(self, method: str, path: str, refusal: Refusal) -> Response: ...
