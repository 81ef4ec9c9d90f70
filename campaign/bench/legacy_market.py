"""The marketplace on the standard library's `ThreadingHTTPServer`, as it was served before
`campaign.web.server`: for `campaign bench market --server legacy` only, so the old transport and the
new one can be measured side by side with the same client on the same machine.

Only the transport is the old one (a thread per connection, the hand-rolled request-line and header
reader, no connection cap, a per-read time-out and none on the whole header section, the first of
duplicate Content-Length headers used); the applications behind it (`MarketApp`, `ContentApp`) are the
ones the real server runs, so the comparison measures the server and nothing else. Never use it to
face people: it has the slow-client and request-smuggling weaknesses the new server removes.

`python -m campaign.bench.legacy_market --port 0 --state DIR` prints the endpoint URL like
`campaign market serve` and serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import urllib.parse
from decimal import Decimal
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from campaign.clock import WallClock
from campaign.credentials import write_credentials_file
from campaign.market import auth
from campaign.market import protocol as P
from campaign.market.accounts import Accounts
from campaign.market.db import Database
from campaign.market.engine import Engine
from campaign.market.faults import FaultConfig, Faults
from campaign.market.server import MAX_BODY, ContentApp, Core, MarketApp, _url, admin_token
from campaign.market.worker_site import ContentSite, SiteConfig, WorkerSite
from campaign.web.asgi import http_date
from campaign.web.request import Refusal, Request, RequestHeaders, Response

READ_TIMEOUT = 20.0
MAX_LINE = 65536
MAX_HEADERS = 100
_PHRASES = {s.value: s.phrase for s in HTTPStatus}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr: tuple[str, int], app: MarketApp | ContentApp) -> None:
        super().__init__(addr, _Handler)
        self.app = app

    def handle_error(self, request: Any, client_address: Any) -> None:
        return


def _read_headers(rfile: Any) -> RequestHeaders | None:
    items: list[tuple[str, str]] = []
    while True:
        line = rfile.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE or len(items) >= MAX_HEADERS:
            return None
        if line in (b"\r\n", b"\n", b""):
            return RequestHeaders(items)
        text = line.decode("iso-8859-1").rstrip("\r\n")
        name, sep, value = text.partition(":")
        if not sep or not name or name != name.strip():
            return None
        items.append((name, value.strip()))


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    raw_requestline: bytes
    protocol_version = "HTTP/1.1"
    server_version = "campaign-market"
    disable_nagle_algorithm = True
    timeout = READ_TIMEOUT

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    def parse_request(self) -> bool:
        self.command = None  # type: ignore[assignment]
        self.request_version = self.default_request_version
        self.close_connection = True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if len(words) != 3:
            return False
        self.close_connection = words[2] != "HTTP/1.1"
        self.request_version = words[2]
        self.command, self.path = words[0], words[1]
        headers = _read_headers(self.rfile)
        if headers is None:
            self.send_error(HTTPStatus.BAD_REQUEST, "Malformed header section")
            return False
        self.headers = headers  # type: ignore[assignment]
        conntype = (headers.get("Connection") or "").lower()
        if conntype == "close":
            self.close_connection = True
        elif conntype == "keep-alive":
            self.close_connection = False
        return True

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding"):
            raise Refusal(411, "LengthRequired", "Transfer-Encoding is not supported; send Content-Length.")
        raw = self.headers.get("Content-Length")
        if raw is None:
            return b""
        raw = raw.strip()
        if not raw.isdigit():
            raise Refusal(400, "InvalidContentLength", "Content-Length is not a number.")
        n = int(raw)
        if n > MAX_BODY:
            raise Refusal(413, "RequestEntityTooLarge", f"The body is larger than {MAX_BODY} bytes.")
        data = self.rfile.read(n) if n else b""
        if len(data) < n:
            raise Refusal(400, "IncompleteBody", "The body is shorter than its Content-Length.")
        return data

    def _send(self, response: Response) -> None:
        if response.close:
            self.close_connection = True
        lines = [f"HTTP/1.1 {response.status} {_PHRASES.get(response.status, '')}", f"Server: {self.server_version}",
                 f"Date: {http_date().decode()}", f"Content-Length: {len(response.body)}"]
        if response.content_type:
            lines.append(f"Content-Type: {response.content_type}")
        lines += [f"{k}: {v}" for k, v in response.headers.items()]
        if self.close_connection:
            lines.append("Connection: close")
        lines.append("\r\n")
        try:
            self.wfile.write("\r\n".join(lines).encode("latin-1") + response.body)
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    def _dispatch(self) -> None:
        app = self.server.app
        url = urllib.parse.urlsplit(self.path)
        try:
            body = self._body() if self.command == "POST" else b""
        except Refusal as refusal:
            return self._send(app.refuse(self.command, url.path, refusal))
        req = Request(self.command, url.path, url.query, self.headers, body, self.client_address[0],  # type: ignore[arg-type]
                      self.server.server_address[1])
        try:
            response = app.handle(req)
        except Exception as exc:  # noqa: BLE001
            response = app.refuse(self.command, url.path, Refusal(500, "InternalError", type(exc).__name__))
        self._send(response)

    do_GET = do_POST = do_HEAD = _dispatch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m campaign.bench.legacy_market")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--state", type=Path, required=True)
    args = ap.parse_args(argv)
    P.warm_up()
    state = Path(args.state)
    db = Database(state)
    accounts = Accounts(state)
    creds = accounts.ensure_account("default")
    engine = Engine(db, WallClock(), mode="sandbox", balance=Decimal("10000.00"))
    site_cfg = SiteConfig()
    site = WorkerSite(engine, accounts, site_cfg)
    core = Core(engine, Faults(FaultConfig()), accounts, site, ContentSite(engine, site_cfg, site), admin_token(state))
    httpd = _Server((args.host, args.port), MarketApp(core))
    content = _Server((args.host, 0), ContentApp(core))
    endpoint = _url(args.host, httpd.server_address[1])
    site_cfg.worker_origin = endpoint
    site_cfg.content_origin = _url(args.host, content.server_address[1])
    core.signing = auth.Signing.for_urls(endpoint, endpoint)
    creds_file = state / "credentials"
    if not creds_file.exists():
        write_credentials_file(creds_file, "default", creds)
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True) for s in (httpd, content)]
    for t in threads:
        t.start()
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    print(endpoint, flush=True)
    while not done.wait(0.5):
        pass
    for s in (httpd, content):
        s.shutdown()
        s.server_close()
    accounts.close()
    db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
