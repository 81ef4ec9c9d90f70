"""The Prolific client reads answers under the same JSON rule as every door (`campaign.untrusted`):
an answer it cannot read is a `ProlificError`, which callers handle, never a RecursionError or a bare
ValueError from deep in a step."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from campaign.prolific.client import ProlificClient, ProlificError

BODIES = {"/deep/": b"[" * 100_000 + b"]" * 100_000, "/nan/": b'{"count": NaN}', "/junk/": b"<html>",
          "/ok/": b'{"id": "x"}'}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        body = BODIES[self.path.split("?")[0].removeprefix("/api/v1")]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def client() -> Iterator[ProlificClient]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield ProlificClient(f"http://127.0.0.1:{httpd.server_address[1]}/api/v1/", "t", max_retries=0)
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("path", ["deep/", "nan/", "junk/"])
def test_an_unreadable_answer_is_a_prolific_error(client: ProlificClient, path: str) -> None:
    with pytest.raises(ProlificError, match="Unreadable answer"):
        client.request("GET", path)


def test_a_readable_answer_is_read(client: ProlificClient) -> None:
    assert client.request("GET", "ok/") == {"id": "x"}
