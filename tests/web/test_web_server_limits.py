"""The server's guards, on a tiny application: strict framing, bounded header sections, the connection cap."""

from __future__ import annotations

import json
import socket
import time

import pytest

from campaign.web.request import Refusal, Request, Response
from campaign.web.server import Limits, RunningServer, listen


class Echo:
    max_body = 1000

    def __init__(self) -> None:
        self.seen: list[bytes] = []

    def handle(self, request: Request) -> Response:
        self.seen.append(request.body)
        return Response(200, "application/json", json.dumps({"path": request.path, "n": len(request.body)}).encode(),
                        {"X-Mixed-Case": "yes"})

    def refuse(self, method: str, path: str, refusal: Refusal) -> Response:
        return Response(refusal.status, "application/json", json.dumps({"error": refusal.code}).encode(), close=True)


@pytest.fixture
def server():
    app = Echo()
    srv = RunningServer({listen("127.0.0.1", 0): app}, Limits(header_timeout=1.0, body_timeout=1.0, max_connections=20,
                                                              max_header_bytes=2000))
    try:
        yield srv, app
    finally:
        srv.stop()


def _exchange(addr: tuple[str, int], data: bytes, shut: bool = False, wait: float = 5.0) -> bytes:
    with socket.create_connection(addr, timeout=wait) as s:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        chunks = []
        try:
            while b := s.recv(65536):
                chunks.append(b)
        except TimeoutError:
            pass
    return b"".join(chunks)


def test_conflicting_duplicate_content_length_is_a_400_and_nothing_runs(server):
    srv, app = server
    reply = _exchange(srv.address(), b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 60\r\n\r\n"
                                     b"abGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n" + b"x" * 20)
    assert reply.startswith(b"HTTP/1.1 400") and reply.count(b"HTTP/1.1") == 1, reply
    assert app.seen == []


def test_content_length_with_transfer_encoding_and_unknown_encodings_are_refused(server):
    srv, app = server
    for head in (b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n", b"Transfer-Encoding: gzip\r\n",
                 b"Transfer-Encoding: chunked\r\n"):
        reply = _exchange(srv.address(), b"POST /x HTTP/1.1\r\nHost: a\r\n" + head + b"\r\n3\r\nabc\r\n0\r\n\r\n")
        assert reply.split(b" ", 2)[1] in (b"400", b"411"), reply
    assert app.seen == []


def test_a_trickled_header_section_is_cut_after_the_deadline(server):
    srv, _ = server
    t0 = time.monotonic()
    with socket.create_connection(srv.address(), timeout=10) as s:
        for byte in b"GET /slow HTTP/1.1\r\nHost: a\r\n":  # a byte every 0.1 s: never idle, never complete
            try:
                s.send(bytes([byte]))
            except OSError:
                break
            time.sleep(0.1)
        reply = s.recv(1000)
    assert reply.startswith(b"HTTP/1.1 408") or reply == b""
    assert time.monotonic() - t0 < 3.5  # the deadline is 1 s for the whole section, not per byte


def test_a_trickled_body_is_cut(server):
    srv, app = server
    with socket.create_connection(srv.address(), timeout=10) as s:
        s.sendall(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nab")
        t0 = time.monotonic()
        reply = b""
        while chunk := s.recv(1000):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 400") and b"IncompleteBody" in reply
    assert time.monotonic() - t0 < 3.0 and app.seen == []


def test_a_half_closed_short_body_gets_a_400_and_a_whole_request_still_its_answer(server):
    srv, app = server
    assert _exchange(srv.address(), b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc", shut=True) \
        .startswith(b"HTTP/1.1 400")
    reply = _exchange(srv.address(), b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc", shut=True)
    assert reply.startswith(b"HTTP/1.1 200") and app.seen == [b"abc"]


def test_header_case_of_the_application_is_kept_and_oversized_headers_are_refused(server):
    srv, _ = server
    reply = _exchange(srv.address(), b"GET /a HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    assert b"\r\nX-Mixed-Case: yes\r\n" in reply
    reply = _exchange(srv.address(), b"GET /a HTTP/1.1\r\nHost: a\r\nX-Big: " + b"b" * 5000 + b"\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 431")


def test_at_the_connection_cap_the_longest_waiting_connection_makes_room(server):
    srv, _ = server
    idle = [socket.create_connection(srv.address(), timeout=5) for _ in range(30)]
    try:
        for s in idle:
            s.send(b"G")
        time.sleep(0.2)
        reply = _exchange(srv.address(), b"GET /now HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 200")
        cut = 0
        for s in idle:
            s.settimeout(0.5)
            try:
                got = s.recv(100)
                cut += got == b"" or got.startswith(b"HTTP/1.1 408")
            except ConnectionResetError:
                cut += 1
            except TimeoutError:
                pass
        assert cut >= 10  # the oldest ones were evicted to stay within 20
    finally:
        for s in idle:
            s.close()
