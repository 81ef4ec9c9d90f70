"""The client backs off from 429 and 5xx exponentially with jitter (clients throttled together do not
come back together) and waits at least a 429's `Retry-After`; a 4xx other than 429 is final at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from campaign.prolific.client import ProlificClient, ProlificError

ANSWERS: list[tuple[int, dict[str, str]]] = []
SEEN: list[str] = []


class _Handler(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        SEEN.append(self.command)
        status, headers = ANSWERS.pop(0) if ANSWERS else (200, {})
        body = b'{"id": "x"}' if status == 200 else b'{"error": {"status": %d, "error_code": 1, "title": "t", "detail": "d"}}' % status
        self.send_response(status)
        for k, v in {"Content-Type": "application/json", "Content-Length": str(len(body)), **headers}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer  # noqa: N815 - stdlib names

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def base() -> Iterator[str]:
    ANSWERS.clear()
    SEEN.clear()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/api/v1/"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_throttling_backs_off_exponentially_with_jitter(base: str) -> None:
    waits: list[float] = []
    ANSWERS.extend([(429, {}), (503, {}), (429, {})])
    assert ProlificClient(base, "t", max_retries=5, sleep=waits.append).request("GET", "users/me/") == {"id": "x"}
    assert len(waits) == 3
    for n, w in enumerate(waits):
        assert 0.5 * 2 ** n * 0.5 <= w <= 0.5 * 2 ** n
    assert waits != [0.5, 1.0, 2.0]  # drawn, not the fixed doubling


def test_a_429_waits_at_least_its_retry_after(base: str) -> None:
    waits: list[float] = []
    ANSWERS.append((429, {"Retry-After": "7"}))
    ProlificClient(base, "t", max_retries=2, sleep=waits.append).request("GET", "users/me/")
    assert waits and waits[0] >= 7


def test_a_400_is_final_at_once(base: str) -> None:
    waits: list[float] = []
    ANSWERS.append((400, {}))
    with pytest.raises(ProlificError) as err:
        ProlificClient(base, "t", max_retries=5, sleep=waits.append).request("POST", "studies/", {"name": "x"}, retry=True)
    assert err.value.status == 400 and waits == [] and SEEN == ["POST"]
