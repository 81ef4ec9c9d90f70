"""The marketplace's HTTP servers.

Two origins, two listening sockets: the *worker site* (the requester API at `POST /`, the worker pages
and their JSON API, a loopback-only admin endpoint) and the *content origin*, which serves nothing but
requesters' HIT HTML, the MTurk script shims and the answer form's `/mturk/externalSubmit`. Requester
HTML therefore never runs with the worker site's origin, even if a frame's sandbox were lifted.

Every requester request must carry a valid SigV4 signature of a key on file (`accounts.py`); there is
no unauthenticated mode. Nothing here logs a request line, header or body: they carry credentials,
worker ids and answers.

`main(argv)` is `campaign market serve`; `start_market(...)` runs both servers in this process (tests,
the daemon, benchmarks) and returns a `RunningMarket` with the credentials of its own account.
"""

from __future__ import annotations

import argparse
import email.utils
import hmac
import json
import os
import secrets
import signal
import socket
import sys
import threading
import time
import urllib.parse
from decimal import Decimal
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from campaign.clock import Clock, ScaledClock, WallClock
from campaign.market import auth
from campaign.market import protocol as P
from campaign.market.accounts import DEFAULT_ACCOUNT, AccountError, Accounts, Credentials, write_credentials_file
from campaign.market.db import Database
from campaign.market.engine import Engine
from campaign.market.faults import FaultConfig, Faults
from campaign.market.operator import Operator, WorkerProfile, offline, register_in_process, unregister_in_process
from campaign.market.worker_site import ContentSite, Reply, SiteConfig, WorkerSite

LOOPBACK = {"127.0.0.1", "::1", "localhost"}
MAX_BODY = 4 * 1024 * 1024  # a Question is at most 64 KiB; an answer form far less than this
READ_TIMEOUT = 20.0  # seconds a client may take to send its headers and body
MAX_LINE = 65536  # a request line or header line longer than this is refused (as http.server does)
MAX_HEADERS = 100  # more header lines than this is refused (as http.client does)


class BadRequest(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class MarketHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr: tuple[str, int], handler: type[BaseHTTPRequestHandler], market: Core) -> None:
        super().__init__(addr, handler)
        self.market = market

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that goes away mid-request is normal on the internet; no traceback for it."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, socket.timeout, OSError)):
            return
        print(f"marketplace: request failed: {type(exc).__name__}", file=sys.stderr)


class RequestHeaders:
    """A request's header lines as sent, looked up without regard to case.

    The part of `http.client.HTTPMessage` the handlers use (get, get_all, items), built from the raw
    lines in one pass: the stdlib builds a full MIME message per request through the email parser,
    which was the largest single cost of a small API request here.
    """

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


class HeaderError(Exception):
    """A header section that cannot be read: too long a line, too many lines, a line without a colon."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def read_headers(rfile: Any) -> RequestHeaders:
    """The header lines up to the blank line; a folded line (leading space or tab) continues the one before."""
    items: list[tuple[str, str]] = []
    while True:
        line = rfile.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise HeaderError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long")
        if line in (b"\r\n", b"\n", b""):
            return RequestHeaders(items)
        if len(items) >= MAX_HEADERS:
            raise HeaderError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers")
        text = line.decode("iso-8859-1").rstrip("\r\n")
        if text[:1] in (" ", "\t"):
            if not items:
                raise HeaderError(HTTPStatus.BAD_REQUEST, "A header section cannot start with a continuation line")
            name, value = items[-1]
            items[-1] = (name, f"{value} {text.strip()}")
            continue
        name, sep, value = text.partition(":")
        if not sep or not name or name != name.strip():
            raise HeaderError(HTTPStatus.BAD_REQUEST, "Malformed header line")
        items.append((name, value.strip()))


_date_cache: tuple[int, str] = (0, "")


def http_date() -> str:
    """The Date header's value, formatted once per second rather than once per response."""
    global _date_cache
    now = int(time.time())
    cached = _date_cache
    if cached[0] != now:
        cached = (now, email.utils.formatdate(now, usegmt=True))
        _date_cache = cached
    return cached[1]


_PHRASES = {s.value: s.phrase for s in HTTPStatus}


class Core:
    """What both servers share."""

    def __init__(self, engine: Engine, faults: Faults, accounts: Accounts, site: WorkerSite, content: ContentSite,
                 admin_token: str = "") -> None:
        self.engine = engine
        self.faults = faults
        self.admin_token = admin_token  # the fault switch's bearer token ("": the switch is off)
        self.accounts = accounts
        self.site = site
        self.content = content
        self.signing = auth.Signing(())  # the Host names it answers to: set once the sockets are bound


class _Base(BaseHTTPRequestHandler):
    server: MarketHTTPServer
    raw_requestline: bytes  # set by BaseHTTPRequestHandler.handle_one_request
    protocol_version = "HTTP/1.1"  # keep-alive: boto3 and the worker client reuse connections
    server_version = "campaign-market"
    disable_nagle_algorithm = True  # headers and body go out in separate writes; Nagle would add ~40 ms
    timeout = READ_TIMEOUT

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return  # request lines carry ids of workers and assignments; nothing is logged

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    def parse_request(self) -> bool:
        """The request line and headers, as `BaseHTTPRequestHandler.parse_request` reads them, but with the
        headers read by `read_headers` (see `RequestHeaders`). HTTP/1.1 keeps the connection open unless
        the client says `Connection: close`; HTTP/1.0 closes it unless the client asks for keep-alive."""
        self.command = None  # type: ignore[assignment]  # stdlib convention until the line is read
        self.request_version = self.default_request_version
        self.close_connection = True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if not words:
            return False
        if len(words) == 3:
            version = words[2]
            major, dot, minor = version[5:].partition(".")
            if (not version.startswith("HTTP/") or not dot or not major.isdigit() or not minor.isdigit()
                    or len(major) > 10 or len(minor) > 10):
                self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request version ({version!r})")
                return False
            number = (int(major), int(minor))
            if number >= (2, 0):
                self.send_error(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, f"Invalid HTTP version ({version[5:]})")
                return False
            self.close_connection = number < (1, 1)
            self.request_version = version
        elif len(words) != 2 or words[0] != "GET":
            self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request syntax ({self.requestline!r})")
            return False
        self.command, self.path = words[0], words[1]
        if self.path.startswith("//"):  # "//host/x" is an absolute URI to a browser: never echo one back
            self.path = "/" + self.path.lstrip("/")
        try:
            self.headers = read_headers(self.rfile)  # type: ignore[assignment]
        except HeaderError as exc:
            self.send_error(exc.status, exc.message)
            return False
        conntype = (self.headers.get("Connection") or "").lower()
        if conntype == "close":
            self.close_connection = True
        elif conntype == "keep-alive":
            self.close_connection = False
        if ((self.headers.get("Expect") or "").lower() == "100-continue" and self.request_version >= "HTTP/1.1"
                and not self.handle_expect_100()):
            return False
        return True

    # -- plumbing -------------------------------------------------------------------------------------
    def _body(self) -> bytes:
        """The whole body or a BadRequest: never a prefix of it (a short body is not the request)."""
        if self.headers.get("Transfer-Encoding"):
            raise BadRequest(411, "LengthRequired", "Transfer-Encoding is not supported; send Content-Length.")
        raw = self.headers.get("Content-Length")
        if raw is None:
            return b""
        raw = raw.strip()
        if not raw.isdigit():
            raise BadRequest(400, "InvalidContentLength", "Content-Length is not a number.")
        n = int(raw)
        if n > MAX_BODY:
            raise BadRequest(413, "RequestEntityTooLarge", f"The body is larger than {MAX_BODY} bytes.")
        if n == 0:
            return b""
        try:
            data = self.rfile.read(n)
        except TimeoutError:
            data = b""
        if len(data) < n:
            raise BadRequest(400, "IncompleteBody", "The body is shorter than its Content-Length.")
        return data

    def _no_body(self) -> bytes:
        """A GET carries no body; if one is announced, the connection is not reused (it would be misread)."""
        if self.headers.get("Transfer-Encoding") or (self.headers.get("Content-Length") or "0").strip() != "0":
            self.close_connection = True
        return b""

    def _send(self, status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        """Status line, headers and body in one write (one system call, one TCP segment for small replies)."""
        lines = [f"{self.protocol_version} {status} {_PHRASES.get(status, '')}", f"Server: {self.server_version}",
                 f"Date: {http_date()}", f"Content-Type: {content_type}", f"Content-Length: {len(body)}",
                 "X-Content-Type-Options: nosniff"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if self.close_connection:
            lines.append("Connection: close")
        lines.append("\r\n")
        data = "\r\n".join(lines).encode("latin-1", "strict")
        try:
            self.wfile.write(data if self.command == "HEAD" else data + body)
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    def _reply(self, reply: Reply) -> None:
        self._send(reply.status, reply.content_type, reply.body, reply.headers)

    def _bad(self, exc: BadRequest, api: bool) -> None:
        self.close_connection = True
        if api:
            body = {"__type": "com.amazon.coral.service#SerializationException", "Message": exc.message}
            self._send(exc.status, P.CONTENT_TYPE, json.dumps(body).encode(), {"x-amzn-RequestId": P.new_request_id()})
        else:
            self._send(exc.status, "application/json", json.dumps({"error": exc.code, "message": exc.message}).encode())

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        raise NotImplementedError

    def _cookies(self) -> str:
        return self.headers.get("Cookie") or ""


class Handler(_Base):
    """The worker site's origin: requester API, worker pages, admin."""

    def _dispatch(self, method: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        is_api = method == "POST" and url.path == "/"
        try:
            body = self._body() if method == "POST" else self._no_body()
        except BadRequest as exc:
            return self._bad(exc, is_api)
        market = self.server.market
        try:
            if is_api:
                return self._requester_api(url, body)
            if url.path == "/admin/faults":
                return self._admin(method, body)
            if url.path == "/health":
                return self._send(200, "application/json", b'{"ok": true}')
            query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
            reply = market.site.route(method, url.path, query, body, dict(self.headers.items()), self.client_address[0])
        except Exception as exc:  # noqa: BLE001 - one bad request must never take the server down
            return self._send(500, "application/json", json.dumps({"error": "InternalError", "message": type(exc).__name__}).encode())
        if reply is None:
            return self._send(404, "text/plain; charset=utf-8", b"not found")
        self._reply(reply)

    def _requester_api(self, url: urllib.parse.SplitResult, body: bytes) -> None:
        rid = P.new_request_id()
        market = self.server.market
        try:
            requester = auth.verify("POST", url.path, url.query, self.headers, body, market.accounts.lookup_key, time.time(),
                                    market.signing)
            verdict = market.faults.decide()
            if verdict == "throttle":
                raise P.throttling()
            if verdict == "fault":
                raise P.service_fault()
            op = P.operation_for(self.headers.get("X-Amz-Target"))
            params = P.validate(op, P.parse_body(body))
            result = market.engine.handle(requester, op, params)
            status, payload = 200, result
        except P.ApiError as exc:
            status, payload = exc.status, exc.body
        except Exception:  # noqa: BLE001 - unexpected: MTurk's answer for its own bugs is a ServiceFault
            err = P.service_fault()
            status, payload = err.status, err.body
        market.signing.settle(status, payload)
        headers = {"x-amzn-RequestId": rid}
        if status == 403:
            headers["x-amzn-ErrorType"] = str(payload.get("__type", ""))
        self._send(status, P.CONTENT_TYPE, json.dumps(payload).encode("utf-8"), headers)

    def _admin(self, method: str, body: bytes) -> None:
        # Loopback alone is not enough: behind a reverse proxy every request comes from loopback.
        market = self.server.market
        given = self.headers.get("Authorization", "")
        token = given[len("Bearer "):] if given.startswith("Bearer ") else ""
        if self.client_address[0] not in LOOPBACK or not market.admin_token or not token or \
                not hmac.compare_digest(token.encode(), market.admin_token.encode()):
            return self._send(403, "application/json", b'{"error": "Forbidden"}')
        if method == "POST":
            try:
                cfg = FaultConfig.from_dict(P.parse_json_object(body))
            except (ValueError, TypeError, P.ApiError) as exc:
                return self._send(400, "application/json", json.dumps({"error": "BadFaults", "message": str(exc)}).encode())
            market.faults.set(cfg)
            market.engine.visibility_lag = cfg.visibility_lag
        self._send(200, "application/json", json.dumps(market.faults.config.to_dict()).encode())


class ContentHandler(_Base):
    """The content origin: requester HTML, shims, the answer form's target. No cookie is read here."""

    def _dispatch(self, method: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        try:
            body = self._body() if method == "POST" else self._no_body()
        except BadRequest as exc:
            return self._bad(exc, False)
        try:
            query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
            reply = self.server.market.content.route(method, url.path, query, body)
        except Exception as exc:  # noqa: BLE001
            return self._send(500, "application/json", json.dumps({"error": "InternalError", "message": type(exc).__name__}).encode())
        if reply is None:
            return self._send(404, "text/plain; charset=utf-8", b"not found")
        self._reply(reply)


def _serve(httpd: MarketHTTPServer, name: str) -> threading.Thread:
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2}, name=name, daemon=True)
    thread.start()
    return thread


def _url(host: str, port: int, scheme: str = "http") -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


class RunningMarket:
    """Both servers on daemon threads; `stop()` closes the sockets and the databases.

    `credentials` are the key pair of this marketplace's own requester account (created on first start
    in the state directory, reused afterwards); `operator` adds accounts and workers."""

    def __init__(self, core: Core, httpd: MarketHTTPServer, content: MarketHTTPServer, db: Database,
                 credentials: Credentials, endpoint_url: str, content_url: str) -> None:
        self.core = core
        self.httpd = httpd
        self.content_httpd = content
        self.db = db
        self.credentials = credentials
        self.endpoint_url = endpoint_url
        self.content_url = content_url
        self.port = httpd.server_address[1]
        self.operator = Operator(core.engine, core.accounts, endpoint_url)
        self._threads = [_serve(httpd, "market-server"), _serve(content, "market-content")]
        register_in_process(endpoint_url, self.operator)

    @property
    def engine(self) -> Engine:
        return self.core.engine

    @property
    def accounts(self) -> Accounts:
        return self.core.accounts

    def add_account(self, name: str) -> Credentials:
        return self.operator.add_account(name)

    def add_worker(self, worker_id: str, **profile: Any) -> str:
        """Adds a worker (country, subdivision, approval, approved, masters) and returns a sign-in code."""
        return self.operator.add_worker(worker_id, WorkerProfile(**profile))

    def set_faults(self, config: FaultConfig | None = None, **settings: Any) -> None:
        cfg = config or FaultConfig.from_dict(settings)
        self.core.faults.set(cfg)
        self.core.engine.visibility_lag = cfg.visibility_lag

    def stop(self) -> None:
        unregister_in_process(self.endpoint_url)
        for httpd in (self.httpd, self.content_httpd):
            httpd.shutdown()
            httpd.server_close()
        for t in self._threads:
            t.join(timeout=5)
        self.core.accounts.close()
        self.db.close()

    def __enter__(self) -> RunningMarket:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_market(state_dir: Path, clock: Clock | None = None, mode: str = "sandbox",
                 balance: Decimal = Decimal("10000.00"), host: str = "127.0.0.1", port: int = 0,
                 faults: FaultConfig | None = None, content_port: int = 0, public_url: str | None = None,
                 content_url: str | None = None, account: str = DEFAULT_ACCOUNT) -> RunningMarket:
    """`public_url` / `content_url` are the addresses browsers use (e.g. https behind a proxy); by default
    the bound addresses. The content origin must differ from the worker site's origin."""
    state_dir = Path(state_dir)
    db = Database(state_dir)
    accounts = Accounts(state_dir)
    credentials = accounts.ensure_account(account)
    engine = Engine(db, clock or WallClock(), mode=mode, balance=Decimal(balance))
    cfg = faults or FaultConfig()
    engine.visibility_lag = cfg.visibility_lag
    site_cfg = SiteConfig()
    site = WorkerSite(engine, accounts, site_cfg)
    content = ContentSite(engine, site_cfg, site)
    core = Core(engine, Faults(cfg), accounts, site, content, admin_token=admin_token(state_dir))
    try:
        httpd = MarketHTTPServer((host, port), Handler, core)
        content_httpd = MarketHTTPServer((host, content_port), ContentHandler, core)
    except OSError:
        accounts.close()
        db.close()
        raise
    endpoint = _url(host, httpd.server_address[1])
    site_cfg.worker_origin = _origin(public_url or endpoint)
    if content_url is None:  # same host name as browsers use for the worker site, the content server's port
        public = urllib.parse.urlsplit(site_cfg.worker_origin)
        content_url = _url(public.hostname or host, content_httpd.server_address[1], public.scheme)
    site_cfg.content_origin = _origin(content_url)
    core.signing = auth.Signing.for_urls(endpoint, site_cfg.worker_origin)
    if site_cfg.worker_origin == site_cfg.content_origin:
        raise ValueError("the content origin must differ from the worker site's origin")
    return RunningMarket(core, httpd, content_httpd, db, credentials, endpoint, site_cfg.content_origin)


ADMIN_TOKEN_FILE = "admin-token"


def admin_token(state_dir: Path) -> str:
    """The bearer token of `/admin/faults`, made once per marketplace folder and readable only by its owner
    (`curl -H "Authorization: Bearer $(cat STATE/admin-token)" ...`)."""
    path = Path(state_dir) / ADMIN_TOKEN_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return path.read_text().strip()
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    return token


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    return f"{parts.scheme}://{parts.netloc}"


# -- command line -------------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="campaign market serve", description="Run the built-in MTurk-compatible marketplace.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--content-port", type=int, default=0, help="port of the HIT content origin (0 = any free port)")
    ap.add_argument("--public-url", default=None, help="the worker site's address as browsers reach it")
    ap.add_argument("--content-url", default=None, help="the HIT content origin's address as browsers reach it")
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
    """`campaign market serve ...`; `account` and `worker` subcommands go to `admin_main`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("account", "worker"):
        return admin_main(argv)
    if argv and argv[0] == "serve":
        argv = argv[1:]
    args = _parser().parse_args(argv)
    if args.host not in LOOPBACK and not (args.public_url and args.content_url):
        print("campaign market serve: on a non-loopback address give --public-url and --content-url (the worker site's "
              "and the HIT content origin's addresses as browsers reach them, ideally https)", file=sys.stderr)
        return 2
    clock: Clock = WallClock() if args.speed == 1.0 else ScaledClock(args.speed)
    P.warm_up()
    faults = FaultConfig(throttle_rate=args.throttle_rate, throttle_burst=args.throttle_burst, fault_rate=args.fault_rate,
                         latency_ms=args.latency_ms, visibility_lag=args.visibility_lag, seed=args.seed)
    creds_file = Path(args.state) / "credentials"
    market = start_market(args.state, clock=clock, mode=args.mode, balance=args.balance, host=args.host,
                          port=args.port, faults=faults, content_port=args.content_port, public_url=args.public_url,
                          content_url=args.content_url)
    if not creds_file.exists():
        write_credentials_file(creds_file, "default", market.credentials)
        print(f"requester account 'default': credentials written to {creds_file} (profile default)", file=sys.stderr)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    print(market.endpoint_url, flush=True)
    print(f"HIT content origin: {market.content_url}", file=sys.stderr, flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        market.stop()
    return 0


def _admin_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="campaign market", description="Operator commands of the built-in marketplace.")
    sub = ap.add_subparsers(dest="what", required=True)
    acc = sub.add_parser("account", help="requester accounts").add_subparsers(dest="action", required=True)
    add = acc.add_parser("add", help="create a requester account; its keys go to STATE/credentials as profile NAME")
    add.add_argument("name")
    add.add_argument("--state", type=Path, default=Path("state/market"))
    wrk = sub.add_parser("worker", help="workers").add_subparsers(dest="action", required=True)
    wadd = wrk.add_parser("add", help="add or update a worker and print a sign-in link and code")
    wadd.add_argument("worker_id")
    wadd.add_argument("--state", type=Path, default=Path("state/market"))
    wadd.add_argument("--url", default="http://127.0.0.1:8765", help="the worker site's address, for the link")
    wadd.add_argument("--country", default="US")
    wadd.add_argument("--subdivision", default=None)
    wadd.add_argument("--approval", type=int, default=100, help="prior percent of assignments approved")
    wadd.add_argument("--approved", type=int, default=0, help="prior number of HITs approved")
    wadd.add_argument("--masters", action="store_true")
    wadd.add_argument("--json", action="store_true")
    wrev = wrk.add_parser("revoke", help="end every session of a worker and void their sign-in code")
    wrev.add_argument("worker_id")
    wrev.add_argument("--state", type=Path, default=Path("state/market"))
    return ap


def account_main(argv: list[str]) -> int:
    """`campaign market account ...`"""
    return admin_main(["account", *argv])


def worker_main(argv: list[str]) -> int:
    """`campaign market worker ...`"""
    return admin_main(["worker", *argv])


def admin_main(argv: list[str]) -> int:
    args = _admin_parser().parse_args(argv)
    op, close = offline(args.state)
    try:
        if args.what == "account":
            try:
                creds = op.add_account(args.name)
            except AccountError as exc:
                print(f"campaign market account add: {exc}", file=sys.stderr)
                return 2
            path = Path(args.state) / "credentials"
            write_credentials_file(path, args.name, creds)
            print(f"account {args.name!r}: access key {creds.access_key_id}; secret written to {path} (profile {args.name})")
            return 0
        if args.action == "revoke":
            ended = op.revoke_worker(args.worker_id)
            print(f"worker {args.worker_id}: {ended} session(s) ended; sign-in code voided (worker add issues a new one)")
            return 0
        try:
            code = op.add_worker(args.worker_id, WorkerProfile(country=args.country, subdivision=args.subdivision,
                                                               approval=args.approval, approved=args.approved, masters=args.masters))
        except Exception as exc:  # noqa: BLE001 - the engine's refusal (bad worker id) is the message
            print(f"campaign market worker add: {getattr(exc, 'message', exc)}", file=sys.stderr)
            return 2
        link = op.signin_link(code, args.url)
        if args.json:
            print(json.dumps({"WorkerId": args.worker_id, "code": code, "link": link}))
        else:
            print(f"worker {args.worker_id}: sign-in link {link}\nsign-in code {code}")
        return 0
    finally:
        close()
