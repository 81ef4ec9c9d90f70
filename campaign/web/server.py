"""uvicorn (with the httptools parser, llhttp) under the guards a server facing the internet needs.

uvicorn parses strictly (duplicate or malformed Content-Length, Content-Length with Transfer-Encoding,
an unknown Transfer-Encoding: 400), runs thousands of idle connections on one event loop without a
thread each, and answers small requests faster than the standard library's server. What it lacks is
added here, in a subclass of its protocol, each piece small:

- a total deadline on the header section (`header_timeout`, from the connection's start or the end of
  the previous answer): uvicorn's keep-alive timer is reset by every byte, so a client sending one
  header byte every few seconds would hold its connection for ever;
- a cap on the header section's size (`max_header_bytes`: 431);
- a cap on open connections (`max_connections`, below the process's file limit): at the cap a new
  connection evicts the one that has waited longest for a complete header section (a slow-loris
  socket, or an idle keep-alive connection), so a flood of trickling sockets cannot lock out a client
  that sends its request at once, and the process never runs out of file descriptors;
- an answer when a client half-closes: inside a body, a 400 (the body is shorter than announced);
  after a whole request, the answer is still sent before the connection closes;
- the application's own error shape for requests the parser refuses (`Application.refuse`).

- a total deadline on a body that does not arrive with its headers (`body_timeout`).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from campaign.web.asgi import AsgiAdapter, encode_headers
from campaign.web.request import Application, Refusal

logging.getLogger("uvicorn.error").setLevel(logging.ERROR)  # "Invalid HTTP request received." is the client's business


@dataclass(frozen=True)
class Limits:
    header_timeout: float = 10.0  # seconds for a whole header section, from the connection's start or the
    # previous answer's end: also how long an idle keep-alive connection is kept
    body_timeout: float = 20.0  # seconds for a whole body, once the headers are in
    max_header_bytes: int = 64 * 1024
    max_connections: int = 0  # 0: as many as the file limit allows, less a reserve for the process's own files
    threads: int = 16  # worker threads running the application


def connection_cap(limits: Limits, reserve: int = 96) -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    by_files = max(16, soft - reserve) if soft != resource.RLIM_INFINITY else 10_000
    return min(limits.max_connections, by_files) if limits.max_connections else min(by_files, 10_000)


class _Guard:
    """One server's connections waiting for a header section, oldest first, and its connection cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.waiting: OrderedDict[GuardedProtocol, None] = OrderedDict()


class _OneWrite:
    """The transport as one request's cycle sees it: the header section uvicorn writes on
    `http.response.start` is held and sent with the body in one `write` (one send, one TCP segment, one
    wake-up of the client, as the old server did), not two. Anything written before the answer starts (a
    `100 Continue`) goes out at once; `flush` and `close` send what is held."""

    __slots__ = ("_transport", "_cycle", "_held")

    def __init__(self, transport: asyncio.Transport, cycle: Any) -> None:
        self._transport = transport
        self._cycle = cycle
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + data)
        elif self._body_follows():
            self._held = data
        else:
            self._transport.write(data)

    def _body_follows(self) -> bool:
        """This write is the header section of an answer whose body is still to be written."""
        cycle = self._cycle
        return (cycle.response_started and not cycle.response_complete and cycle.chunked_encoding is False
                and cycle.expected_content_length > 0 and cycle.scope["method"] != "HEAD")

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GuardedProtocol(HttpToolsProtocol):
    """Set per server by `_protocol_class`: the guard, the limits, the applications by port."""

    guard: _Guard
    limits: Limits
    adapter: AsgiAdapter

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._deadline_at: float | None = None  # when the header section now awaited is due (None: none awaited)
        self._chunk = 0  # the size of the chunk being parsed
        self._body_deadline: asyncio.TimerHandle | None = None
        self._header_bytes = 0
        self._begun = False  # a request's first bytes have been parsed
        self._refused = False

    # -- waiting for a header section -------------------------------------------------------------------
    def _wait(self) -> None:
        """Await a header section. The connection's one timer is armed once and, when it fires early (a
        request came and went meanwhile), re-armed for the current deadline: no timer made and cancelled
        per request on a busy keep-alive connection."""
        self._header_bytes = 0
        self._begun = False
        self.guard.waiting[self] = None
        self.guard.waiting.move_to_end(self)
        self._deadline_at = at = self.loop.time() + self.limits.header_timeout
        if self._deadline is None:
            self._deadline = self.loop.call_at(at, self._due)

    def _unwait(self) -> None:
        self.guard.waiting.pop(self, None)
        self._deadline_at = None

    def _stop_timer(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _due(self) -> None:
        self._deadline = None
        at = self._deadline_at
        if at is None:  # no header section awaited now: the next `_wait` arms the timer again
            return
        if self.loop.time() < at:
            self._deadline = self.loop.call_at(at, self._due)
            return
        self._cut()

    def _cut(self) -> None:
        """The header section did not arrive in time (or this connection is evicted at the cap)."""
        self._unwait()
        self._stop_timer()
        if self.transport.is_closing():
            return
        if self._begun:  # a request was under way: say why it ends (an idle connection just closes)
            self._refuse(408, "RequestTimeout", "The request's header section did not arrive in time.")
        else:
            self.transport.close()

    def _refuse(self, status: int, code: str, message: str) -> None:
        self._refused = True
        method, path = "", ""
        try:
            method = self.parser.get_method().decode("latin-1") if self.parser is not None else ""
        except Exception:  # noqa: BLE001 - the request line may not be parsed yet
            method = ""
        url = getattr(self, "url", b"") or b""
        path = url.split(b"?", 1)[0].decode("latin-1")
        app = self.adapter.app_for((self.server[1] if self.server else 0) or 0)
        response = app.refuse(method, path, Refusal(status, code, message))
        head = [f"HTTP/1.1 {status} {_phrase(status)}".encode("latin-1")]
        head += [name + b": " + value for name, value in encode_headers(response, self.adapter.server_name, True)]
        self.transport.write(b"\r\n".join(head) + b"\r\n\r\n" + response.body)
        self.transport.close()

    # -- uvicorn's protocol -----------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # headers and body go out in two writes; Nagle with the client's delayed ACK would add 40 ms
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._wait()
        if len(self.connections) > self.guard.cap:
            victim = next(iter(self.guard.waiting))
            victim._cut()

    def connection_lost(self, exc: Exception | None) -> None:
        self._unwait()
        self._stop_timer()
        self._body_done()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        self._chunk = len(data)
        super().data_received(data)
        if self._refused or self.transport.is_closing():
            return
        if self.guard.waiting.get(self, 1) is None:  # still in a header section
            self._header_bytes += len(data)
            if self._header_bytes > self.limits.max_header_bytes:
                self._refuse(431, "HeadersTooLarge", "The header section is too large.")
        elif self._body_deadline is None and self.cycle is not None and self.cycle.more_body \
                and not self.cycle.response_started:
            # a body still on its way (most arrive with their headers, and need no timer)
            self._body_deadline = self.loop.call_later(self.limits.body_timeout, self._body_late)

    def _body_done(self) -> None:
        if self._body_deadline is not None:
            self._body_deadline.cancel()
            self._body_deadline = None

    def _body_late(self) -> None:
        self._body_deadline = None
        cycle = self.cycle
        if cycle is None or not cycle.more_body or cycle.response_started or self.transport.is_closing():
            return
        cycle.disconnected = True
        cycle.message_event.set()
        self._refuse(400, "IncompleteBody", "The body did not arrive in time.")

    def send_400_response(self, msg: str) -> None:
        self._unwait()
        self._refuse(400, "BadRequest", "Malformed HTTP request.")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._begun = True

    def _header_size(self) -> int:
        """The header section just parsed. Counted only when the bytes received for it (the earlier
        chunks, counted by `data_received`, and this one) could exceed the cap: per header it would cost
        a Python call on every request."""
        if self._header_bytes + self._chunk <= self.limits.max_header_bytes:
            return 0
        return len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)

    def on_headers_complete(self) -> None:
        if self._header_size() > self.limits.max_header_bytes:
            self._unwait()
            self._refuse(431, "HeadersTooLarge", "The header section is too large.")
            return
        self._unwait()
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.transport is self.transport:
            cycle.transport = _OneWrite(self.transport, cycle)  # type: ignore[assignment]

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._body_done()
        if not self._refused:
            super().on_message_complete()

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)
        super().on_response_complete()
        if not pipelined and not self.transport.is_closing():
            self._wait()

    def eof_received(self) -> bool | None:  # type: ignore[override]
        """The client half-closed. Inside a body: the body is short, answer 400. After a whole request:
        keep the connection open to send the answer, then close it."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete or self.guard.waiting.get(self, 1) is None:
            return None
        if cycle.more_body and not cycle.response_started:
            cycle.disconnected = True
            cycle.message_event.set()
            self._refuse(400, "IncompleteBody", "The body is shorter than its Content-Length.")
            return None
        cycle.keep_alive = False
        return True


def _phrase(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _protocol_class(guard: _Guard, limits: Limits, adapter: AsgiAdapter) -> type[GuardedProtocol]:
    return type("Protocol", (GuardedProtocol,), {"guard": guard, "limits": limits, "adapter": adapter})


def listen(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A bound, listening socket (port 0: any free port), so the caller knows its address before serving."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class RunningServer:
    """One uvicorn server on its own thread and event loop, serving `apps` (port -> application) on the
    given listening sockets; `stop()` ends it and closes the sockets."""

    def __init__(self, apps: dict[socket.socket, Application], limits: Limits = Limits(), name: str = "http",
                 server_name: str = "campaign") -> None:
        self.sockets = list(apps)
        self.pool = ThreadPoolExecutor(max_workers=limits.threads, thread_name_prefix=f"{name}-app")
        adapter = AsgiAdapter({s.getsockname()[1]: app for s, app in apps.items()}, self.pool, server_name)
        self.guard = _Guard(connection_cap(limits))
        # loop "auto": uvloop (a dependency on POSIX) when importable; it takes about a third off the
        # server's own CPU per request (docs/http-server.md), else asyncio's loop
        config = uvicorn.Config(adapter, http=_protocol_class(self.guard, limits, adapter), loop="auto",
                                lifespan="off", log_config=None, access_log=False, proxy_headers=False,
                                server_header=False, date_header=False,
                                timeout_keep_alive=int(limits.header_timeout) + 5,  # the header deadline comes first
                                timeout_graceful_shutdown=5, backlog=2048, ws="none")
        self.server = uvicorn.Server(config)
        self._error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()
        while not self.server.started and self.thread.is_alive():
            self.thread.join(0.01)
        if not self.server.started:
            raise RuntimeError(f"the {name} server did not start: {self._error!r}")

    def _run(self) -> None:
        try:
            self.server.run(sockets=self.sockets)
        except BaseException as exc:  # noqa: BLE001 - reported by the constructor or stop()
            self._error = exc

    def address(self, index: int = 0) -> tuple[str, int]:
        host, port = self.sockets[index].getsockname()[:2]
        return host, port

    @property
    def server_address(self) -> tuple[str, int]:
        """The first socket's address, as `socketserver` names it."""
        return self.address(0)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        for sock in self.sockets:
            sock.close()
        self.pool.shutdown(wait=False, cancel_futures=True)
