"""The marketplace's HTTP server: the requester API (JSON 1.1, as boto3 speaks it), the worker site and a
loopback-only admin endpoint for fault injection; `main(argv)` for `campaign market serve` and
`start_market(...)` for running it inside another process (tests, the daemon, benchmarks).

No credential is stored or logged: only the access key id from the SigV4 `Credential=` field is read,
to pick the requester account; the signature is not checked.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import threading
import urllib.parse
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from campaign.clock import Clock, ScaledClock, WallClock
from campaign.market import protocol as P
from campaign.market.db import Database
from campaign.market.engine import Engine
from campaign.market.faults import FaultConfig, Faults
from campaign.market.worker_site import WorkerSite

CREDENTIAL_RE = re.compile(r"Credential=([A-Za-z0-9]+)/")
DEFAULT_REQUESTER = "ANONYMOUS"
LOOPBACK = {"127.0.0.1", "::1", "localhost"}


class MarketHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr: tuple[str, int], engine: Engine, faults: Faults) -> None:
        super().__init__(addr, Handler)
        self.engine = engine
        self.faults = faults
        self.site = WorkerSite(engine)


class Handler(BaseHTTPRequestHandler):
    server: MarketHTTPServer
    protocol_version = "HTTP/1.1"  # keep-alive: boto3 and the worker client reuse connections
    disable_nagle_algorithm = True  # headers and body go out in separate writes; Nagle would add ~40 ms

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return  # request lines may carry ids of workers; nothing is logged

    # -- plumbing -------------------------------------------------------------------------------------
    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _send(self, status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _base_url(self) -> str:
        host = self.headers.get("Host") or "{}:{}".format(*self.server.server_address[:2])
        return f"http://{host}"

    # -- verbs ----------------------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._dispatch("GET", b"")

    def do_POST(self) -> None:
        self._dispatch("POST", self._body())

    def _dispatch(self, method: str, body: bytes) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        try:
            if method == "POST" and url.path == "/":
                return self._requester_api(body)
            if url.path == "/admin/faults":
                return self._admin(method, body)
            if url.path == "/health":
                return self._send(200, "application/json", b'{"ok": true}')
            reply = self.server.site.route(method, url.path, query, body, self._base_url())
        except Exception as exc:  # noqa: BLE001 - one bad request must never take the server down
            return self._send(500, "application/json", json.dumps({"error": "InternalError", "message": type(exc).__name__}).encode())
        if reply is None:
            return self._send(404, "text/plain; charset=utf-8", b"not found")
        self._send(reply.status, reply.content_type, reply.body, reply.headers)

    def _requester_api(self, body: bytes) -> None:
        rid = P.new_request_id()
        try:
            verdict = self.server.faults.decide()
            if verdict == "throttle":
                raise P.throttling()
            if verdict == "fault":
                raise P.service_fault()
            op = P.operation_for(self.headers.get("X-Amz-Target"))
            params = P.validate(op, P.parse_body(body))
            m = CREDENTIAL_RE.search(self.headers.get("Authorization") or "")
            requester = m.group(1) if m else DEFAULT_REQUESTER
            result = self.server.engine.handle(requester, op, params)
            status, payload = 200, result
        except P.ApiError as exc:
            status, payload = exc.status, exc.body
        except Exception:  # noqa: BLE001 - unexpected: MTurk's answer for its own bugs is a ServiceFault
            err = P.service_fault()
            status, payload = err.status, err.body
        self._send(status, P.CONTENT_TYPE, json.dumps(payload).encode("utf-8"), {"x-amzn-RequestId": rid})

    def _admin(self, method: str, body: bytes) -> None:
        if self.client_address[0] not in LOOPBACK:
            return self._send(403, "application/json", b'{"error": "Forbidden"}')
        faults = self.server.faults
        if method == "POST":
            try:
                cfg = FaultConfig.from_dict(json.loads(body.decode("utf-8") or "{}"))
            except (ValueError, TypeError) as exc:
                return self._send(400, "application/json", json.dumps({"error": "BadFaults", "message": str(exc)}).encode())
            faults.set(cfg)
            self.server.engine.visibility_lag = cfg.visibility_lag
        self._send(200, "application/json", json.dumps(faults.config.to_dict()).encode())


class RunningMarket:
    """A marketplace serving on a daemon thread; `stop()` closes the socket and the database."""

    def __init__(self, httpd: MarketHTTPServer, db: Database, thread: threading.Thread) -> None:
        self.httpd = httpd
        self.db = db
        self.thread = thread
        host, port = httpd.server_address[:2]
        self.endpoint_url = f"http://{host}:{port}"
        self.port = port

    @property
    def engine(self) -> Engine:
        return self.httpd.engine

    def set_faults(self, config: FaultConfig | None = None, **settings: Any) -> None:
        cfg = config or FaultConfig.from_dict(settings)
        self.httpd.faults.set(cfg)
        self.httpd.engine.visibility_lag = cfg.visibility_lag

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
        self.db.close()

    def __enter__(self) -> RunningMarket:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_market(state_dir: Path, clock: Clock | None = None, mode: str = "sandbox",
                 balance: Decimal = Decimal("10000.00"), host: str = "127.0.0.1", port: int = 0,
                 faults: FaultConfig | None = None) -> RunningMarket:
    db = Database(Path(state_dir))
    engine = Engine(db, clock or WallClock(), mode=mode, balance=Decimal(balance))
    cfg = faults or FaultConfig()
    engine.visibility_lag = cfg.visibility_lag
    httpd = MarketHTTPServer((host, port), engine, Faults(cfg))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="market-server", daemon=True)
    thread.start()
    return RunningMarket(httpd, db, thread)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="campaign market serve", description="Run the built-in MTurk-compatible marketplace.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--state", type=Path, default=Path("state/market"))
    ap.add_argument("--mode", choices=("sandbox", "prod"), default="sandbox")
    ap.add_argument("--balance", type=Decimal, default=Decimal("10000.00"))
    ap.add_argument("--speed", type=float, default=1.0, help="clock speed-up (1.0 = wall clock)")
    ap.add_argument("--throttle-rate", type=float, default=0.0)
    ap.add_argument("--throttle-burst", type=float, default=10.0)
    ap.add_argument("--fault-rate", type=float, default=0.0)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--visibility-lag", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.host not in LOOPBACK:
        print(f"warning: serving on {args.host}; the requester API has no authentication", file=sys.stderr)
    clock: Clock = WallClock() if args.speed == 1.0 else ScaledClock(args.speed)
    faults = FaultConfig(throttle_rate=args.throttle_rate, throttle_burst=args.throttle_burst, fault_rate=args.fault_rate,
                         latency_ms=args.latency_ms, visibility_lag=args.visibility_lag, seed=args.seed)
    market = start_market(args.state, clock=clock, mode=args.mode, balance=args.balance, host=args.host,
                          port=args.port, faults=faults)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    print(market.endpoint_url, flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        market.stop()
    return 0
