"""Request framing on the marketplace's two origins: one request is one request (no smuggling)."""

from __future__ import annotations

import socket
import urllib.parse


def _exchange(url: str, data: bytes) -> bytes:
    parts = urllib.parse.urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=5) as s:
        s.sendall(data)
        chunks = []
        try:
            while b := s.recv(65536):
                chunks.append(b)
        except (TimeoutError, ConnectionResetError):
            pass
    return b"".join(chunks)


def test_conflicting_duplicate_content_length_is_a_400_on_both_origins(market):
    smuggled = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    for url in (market.server.endpoint_url, market.server.content_url):
        body = b"{}" + smuggled + b"x" * (60 - 2 - len(smuggled))
        reply = _exchange(url, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 60\r\n"
                               b"Content-Type: application/x-amz-json-1.1\r\n\r\n" + body)
        assert reply.startswith(b"HTTP/1.1 400"), reply[:300]
        assert reply.count(b"HTTP/1.1 ") == 1, reply  # the rest of the body is not answered as a second request
