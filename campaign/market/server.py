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
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from campaign import argtypes
from campaign.clock import Clock, ScaledClock, WallClock
from campaign.credentials import Credentials, write_credentials_file
from campaign.jsonout import dumps
from campaign.market import auth
from campaign.market import protocol as P
from campaign.market.accounts import DEFAULT_ACCOUNT, AccountError, Accounts
from campaign.market.db import Database
from campaign.market.engine import Engine
from campaign.market.faults import FaultConfig, Faults
from campaign.market.operator import Operator, WorkerProfile, offline, register_in_process, unregister_in_process
from campaign.market.worker_site import ContentSite, Reply, SiteConfig, SiteExtension, WorkerSite
from campaign.web.request import Refusal, Request, Response
from campaign.web.server import Limits, RunningServer, listen

LOOPBACK = {"127.0.0.1", "::1", "localhost"}
MAX_BODY = 4 * 1024 * 1024  # a Question is at most 64 KiB; an answer form far less than this


class Core:
    """What both origins share."""

    def __init__(self, engine: Engine, faults: Faults, accounts: Accounts, site: WorkerSite, content: ContentSite,
                 admin_token: str = "") -> None:
        self.engine = engine
        self.faults = faults
        self.admin_token = admin_token  # the fault switch's bearer token ("": the switch is off)
        self.accounts = accounts
        self.site = site
        self.content = content
        self.signing = auth.Signing(())  # the Host names it answers to: set once the sockets are bound
        # `campaign market serve --prolific-door`: the door's operations for daemons in other processes
        # (`campaign.market.door_remote`), answered on the requester endpoint; None: not served here
        self.door_ops: Any = None


def _json_reply(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(status, "application/json", json.dumps(payload).encode("utf-8"), headers or {})


def _response(reply: Reply | None) -> Response:
    if reply is None:
        return Response(404, "text/plain; charset=utf-8", b"not found", dict(NOSNIFF))
    return Response(reply.status, reply.content_type, reply.body, {**NOSNIFF, **(reply.headers or {})})


NOSNIFF = {"X-Content-Type-Options": "nosniff"}


class MarketApp:
    """The worker site's origin: requester API (`POST /`), worker pages and API, the Prolific door's
    routes (through `WorkerSite.route`), `/health` and the loopback admin. No socket here: the server
    (`campaign.web.server`) hands it whole requests."""

    max_body = MAX_BODY

    def __init__(self, core: Core) -> None:
        self.core = core

    def refuse(self, method: str, path: str, refusal: Refusal) -> Response:
        """The error shape of a request refused before routing: the API's on `POST /`, JSON elsewhere."""
        if method == "POST" and path == "/":
            body = {"__type": "com.amazon.coral.service#SerializationException", "Message": refusal.message}
            return Response(refusal.status, P.CONTENT_TYPE, json.dumps(body).encode(),
                            {**NOSNIFF, "x-amzn-RequestId": P.new_request_id()}, close=True)
        return _error_reply(refusal)

    def inline(self, req: Request) -> bool:
        """Every route runs on the server's event loop (no hand-off to a worker thread: see
        `campaign.web.request.Application`) unless the fault switch adds latency, whose sleep must not
        stall the other connections. Nothing else here waits: no outbound calls, SQLite's readers never
        block and its one writer is this thread (the checkpointer holds the write lock only briefly)."""
        return _quick(self.core)

    def handle(self, req: Request) -> Response:
        if req.method not in ("GET", "HEAD", "POST"):
            return Response(501, "application/json", b'{"error": "NotImplemented"}', dict(NOSNIFF))
        method = "GET" if req.method == "HEAD" else req.method
        if method == "POST" and req.path == "/":
            return self.requester_api(req)
        if req.path == "/admin/faults":
            return self._admin(method, req)
        if req.path == "/health":
            return Response(200, "application/json", b'{"ok": true}', dict(NOSNIFF))
        if req.path == "/clock" and method == "GET":
            # the marketplace's time (simulated at --speed), which daemons and the crowd working here
            # follow (`campaign.marketplaces.remote_clock`); the time of day is no secret, the wall's is in every Date header
            clock = self.core.engine.clock
            return _json_reply(200, {"now": clock.now(), "speed": float(getattr(clock, "speed", 1.0))},
                               {**NOSNIFF, "Cache-Control": "no-store"})
        reply = self.core.site.route(method, req.path, req.query_dict(), req.body if method == "POST" else b"",
                                     dict(req.headers.items()), req.client)
        return _response(reply)

    def requester_api(self, req: Request) -> Response:
        """Every requester call: authenticated (`auth.verify` on the request as sent), then faults, then the engine."""
        rid = P.new_request_id()
        core = self.core
        try:
            requester = auth.verify("POST", req.path, req.query, req.headers, req.body, core.accounts.lookup_key, time.time(),
                                    core.signing)
            verdict = core.faults.decide()
            if verdict == "throttle":
                raise P.throttling()
            if verdict == "fault":
                raise P.service_fault()
            target = str(req.headers.get("X-Amz-Target") or "")
            if core.door_ops is not None and target.startswith("ProlificDoor."):
                result = core.door_ops.handle(target, P.parse_body(req.body))
            else:
                op = P.operation_for(req.headers.get("X-Amz-Target"))
                params = P.validate(op, P.parse_body(req.body))
                result = core.engine.handle(requester, op, params)
            if core.faults.lose():  # it took effect; the client is told it failed (`FaultConfig.lost_rate`)
                raise P.service_fault()
            status, payload = 200, result
        except P.ApiError as exc:
            status, payload = exc.status, exc.body
        except Exception:  # noqa: BLE001 - unexpected: MTurk's answer for its own bugs is a ServiceFault
            err = P.service_fault()
            status, payload = err.status, err.body
        core.signing.settle(status, payload)
        headers = {**NOSNIFF, "x-amzn-RequestId": rid}
        if status == 403:
            headers["x-amzn-ErrorType"] = str(payload.get("__type", ""))
        return Response(status, P.CONTENT_TYPE, json.dumps(payload).encode("utf-8"), headers)

    def _admin(self, method: str, req: Request) -> Response:
        # Loopback alone is not enough: behind a reverse proxy every request comes from loopback.
        core = self.core
        given = req.headers.get("Authorization", "")
        token = given[len("Bearer "):] if given.startswith("Bearer ") else ""
        if req.client not in LOOPBACK or not core.admin_token or not token or \
                not hmac.compare_digest(token.encode(), core.admin_token.encode()):
            return Response(403, "application/json", b'{"error": "Forbidden"}', dict(NOSNIFF))
        if method == "POST":
            try:
                cfg = FaultConfig.from_dict(P.parse_json_object(req.body))
            except (ValueError, TypeError, P.ApiError) as exc:
                return _json_reply(400, {"error": "BadFaults", "message": str(exc)}, dict(NOSNIFF))
            core.faults.set(cfg)
            core.engine.visibility_lag = cfg.visibility_lag
        return _json_reply(200, core.faults.config.to_dict(), dict(NOSNIFF))


class ContentApp:
    """The content origin: requester HTML, shims, the answer form's target. No cookie is read here."""

    max_body = MAX_BODY

    def __init__(self, core: Core) -> None:
        self.core = core

    def refuse(self, method: str, path: str, refusal: Refusal) -> Response:
        return _error_reply(refusal)

    def inline(self, req: Request) -> bool:
        """As `MarketApp.inline`: the pages and the answer form's target never wait."""
        return _quick(self.core)

    def handle(self, req: Request) -> Response:
        if req.method not in ("GET", "HEAD", "POST"):
            return Response(501, "application/json", b'{"error": "NotImplemented"}', dict(NOSNIFF))
        method = "GET" if req.method == "HEAD" else req.method
        reply = self.core.content.route(method, req.path, req.query_dict(), req.body if method == "POST" else b"")
        return _response(reply)


def _quick(core: Core) -> bool:
    """No fault latency configured: a request does not sleep (`Faults.decide`)."""
    return core.faults.config.latency_ms <= 0


def _error_reply(refusal: Refusal) -> Response:
    return Response(refusal.status, "application/json",
                    json.dumps({"error": refusal.code, "message": refusal.message}).encode(), dict(NOSNIFF),
                    close=refusal.status != 500)


def _url(host: str, port: int, scheme: str = "http") -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


class RunningMarket:
    """Both origins on one server thread (`campaign.web.server`); `stop()` closes the sockets and the databases.

    `credentials` are the key pair of this marketplace's own requester account (created on first start
    in the state directory, reused afterwards); `operator` adds accounts and workers."""

    def __init__(self, core: Core, server: RunningServer, db: Database, credentials: Credentials, endpoint_url: str,
                 content_url: str) -> None:
        self.core = core
        self.server = server
        self.db = db
        self.credentials = credentials
        self.endpoint_url = endpoint_url
        self.content_url = content_url
        self.port = server.address(0)[1]
        self.app: MarketApp | None = None  # the worker site's application (for `campaign.web.loopback`)
        self.operator = Operator(core.engine, core.accounts, endpoint_url)
        register_in_process(endpoint_url, self.operator)

    @property
    def engine(self) -> Engine:
        return self.core.engine

    @property
    def accounts(self) -> Accounts:
        return self.core.accounts

    @property
    def site_config(self) -> SiteConfig:
        return self.core.site.config

    def mount(self, prefix: str, extension: SiteExtension) -> None:
        """Serve `prefix` on the worker site with `extension` (`WorkerSite.mount`)."""
        self.core.site.mount(prefix, extension)

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
        self.server.stop()
        self.core.accounts.close()
        self.db.close()

    def __enter__(self) -> RunningMarket:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_market(state_dir: Path, clock: Clock | None = None, mode: str = "sandbox",
                 balance: Decimal = Decimal("10000.00"), host: str = "127.0.0.1", port: int = 0,
                 faults: FaultConfig | None = None, content_port: int = 0, public_url: str | None = None,
                 content_url: str | None = None, account: str = DEFAULT_ACCOUNT,
                 limits: Limits | None = None) -> RunningMarket:
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
    sockets: list[socket.socket] = []
    try:
        sockets.append(listen(host, port))
        sockets.append(listen(host, content_port))
        endpoint = _url(host, sockets[0].getsockname()[1])
        site_cfg.worker_origin = _origin(public_url or endpoint)
        if content_url is None:  # same host name as browsers use for the worker site, the content server's port
            public = urllib.parse.urlsplit(site_cfg.worker_origin)
            content_url = _url(public.hostname or host, sockets[1].getsockname()[1], public.scheme)
        site_cfg.content_origin = _origin(content_url)
        core.signing = auth.Signing.for_urls(endpoint, site_cfg.worker_origin)
        if site_cfg.worker_origin == site_cfg.content_origin:
            raise ValueError("the content origin must differ from the worker site's origin")
        api = MarketApp(core)
        server = RunningServer({sockets[0]: api, sockets[1]: ContentApp(core)}, limits or Limits(),
                               name="market-server", server_name="campaign-market")
    except BaseException:
        for sock in sockets:
            sock.close()
        accounts.close()
        db.close()
        raise
    running = RunningMarket(core, server, db, credentials, endpoint, site_cfg.content_origin)
    running.app = api
    return running


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
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    ap.add_argument("--port", type=argtypes.port, default=8765, help="port of the API and the worker site (default: 8765)")
    ap.add_argument("--content-port", type=argtypes.port, default=0, help="port of the HIT content origin (0 = any free port)")
    ap.add_argument("--public-url", default=None, help="the worker site's address as browsers reach it")
    ap.add_argument("--content-url", default=None, help="the HIT content origin's address as browsers reach it")
    ap.add_argument("--state", type=Path, default=Path("state/market"), help="folder of the marketplace's database and credentials file (default: state/market)")
    ap.add_argument("--mode", choices=("sandbox", "prod"), default="sandbox", help="which MTurk endpoint it stands in for: sandbox or prod (default: sandbox)")
    ap.add_argument("--balance", type=Decimal, default=Decimal("10000.00"), help="a new requester account's balance in dollars (default: 10000.00)")
    ap.add_argument("--speed", type=float, default=1.0, help="clock speed-up (1.0 = wall clock)")
    ap.add_argument("--throttle-rate", type=float, default=0.0, help="requests per second each requester may make, for testing throttling (0: no limit)")
    ap.add_argument("--throttle-burst", type=float, default=10.0, help="requests allowed in a burst above --throttle-rate (default: 10)")
    ap.add_argument("--fault-rate", type=float, default=0.0, help="probability (0-1) that a request fails with a ServiceFault, for testing retries")
    ap.add_argument("--lost-rate", type=float, default=0.0,
                    help="probability (0-1) that a request takes effect but is answered with a ServiceFault, for testing "
                         "that a client's retry never does twice what the first call did")
    ap.add_argument("--latency-ms", type=float, default=0.0, help="milliseconds added to every response, for testing")
    ap.add_argument("--visibility-lag", type=float, default=0.0, help="clock seconds a submission stays invisible to the requester, as on MTurk")
    ap.add_argument("--seed", type=argtypes.seed, default=0, help="seed of the injected faults (default: 0)")
    ap.add_argument("--prolific-door", action="store_true",
                    help="serve the Prolific door (/prolific/ on the worker site) here, for daemons whose "
                         "`marketplace: prolific` campaigns name this marketplace as endpoint_url (several daemons share "
                         "it; it outlives each); it asks Prolific about each participant with $PROLIFIC_TOKEN "
                         "($PROLIFIC_BASE_URL), and keeps its table in STATE/prolific-site")
    ap.add_argument("--door-db", default=None, metavar="URL",
                    help="with --prolific-door: the campaigns' store (`campaign run --db`), read for the items each HIT "
                         "shows, so that no participant is given an item twice in a stage")
    ap.add_argument("--door-config", default=None, metavar="SPEC",
                    help="with --prolific-door and --door-db: the campaigns' spec, so that an answer the HIT's task kind "
                         "cannot read is refused at the door (the participant may answer again)")
    return ap


class DoorStartError(Exception):
    """Why `campaign market serve --prolific-door` cannot serve the door (raised by the `door` hook)."""


def main(argv: list[str] | None = None, door: Callable[..., Callable[[], None]] | None = None) -> int:
    """`campaign market serve ...`; `account` and `worker` subcommands go to `admin_main`. `door` mounts the
    Prolific door for `--prolific-door` (`campaign.providers.prolific_door.serve_door`, passed in by the
    command line: the server package does not reach up to the Prolific client)."""
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
                         lost_rate=args.lost_rate, latency_ms=args.latency_ms, visibility_lag=args.visibility_lag, seed=args.seed)
    creds_file = Path(args.state) / "credentials"
    market = start_market(args.state, clock=clock, mode=args.mode, balance=args.balance, host=args.host,
                          port=args.port, faults=faults, content_port=args.content_port, public_url=args.public_url,
                          content_url=args.content_url)
    if not creds_file.exists():
        write_credentials_file(creds_file, "default", market.credentials)
        print(f"requester account 'default': credentials written to {creds_file} (profile default)", file=sys.stderr)
    close_door = None
    if args.prolific_door:
        if door is None:
            print("campaign market serve: --prolific-door is served by `campaign market serve` (this entry point has "
                  "no Prolific client)", file=sys.stderr)
            market.stop()
            return 2
        try:
            close_door = door(market, Path(args.state), db=args.door_db, config=args.door_config)
        except DoorStartError as exc:  # the door's own refusal to start, said as it is
            print(f"campaign market serve: {exc}", file=sys.stderr)
            market.stop()
            return 2
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
        if close_door is not None:
            close_door()
    return 0


def _admin_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="campaign market", description="Operator commands of the built-in marketplace.")
    sub = ap.add_subparsers(dest="what", required=True)
    acc = sub.add_parser("account", help="requester accounts").add_subparsers(dest="action", required=True)
    add = acc.add_parser("add", help="create a requester account; its keys go to STATE/credentials as profile NAME")
    add.add_argument("name", help="the account's name; its keys are written as the credentials profile NAME")
    add.add_argument("--state", type=Path, default=Path("state/market"), help="the marketplace's state folder (default: state/market)")
    wrk = sub.add_parser("worker", help="workers").add_subparsers(dest="action", required=True)
    wadd = wrk.add_parser("add", help="add or update a worker and print a sign-in link and code")
    wadd.add_argument("worker_id", help="the worker's id (letters and digits, as on MTurk)")
    wadd.add_argument("--state", type=Path, default=Path("state/market"), help="the marketplace's state folder (default: state/market)")
    wadd.add_argument("--url", default="http://127.0.0.1:8765", help="the worker site's address, for the link")
    wadd.add_argument("--country", default="US", help="the worker's country (ISO 3166 code) for locale qualifications (default: US)")
    wadd.add_argument("--subdivision", default=None, help="the worker's state or region (ISO 3166-2 code, e.g. CA), if a qualification asks for it")
    wadd.add_argument("--approval", type=argtypes.percent, default=100, help="prior percent of assignments approved")
    wadd.add_argument("--approved", type=argtypes.count, default=0, help="prior number of HITs approved")
    wadd.add_argument("--masters", action="store_true", help="give the worker the Masters qualification")
    wadd.add_argument("--json", action="store_true", help="print the worker, link and code as one JSON object")
    wrev = wrk.add_parser("revoke", help="end every session of a worker and void their sign-in code")
    wrev.add_argument("worker_id", help="the worker whose sessions and sign-in code end")
    wrev.add_argument("--state", type=Path, default=Path("state/market"), help="the marketplace's state folder (default: state/market)")
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
            if not op.knows_worker(args.worker_id):  # a mistyped id must not read as a revoked worker
                print(f"campaign market worker revoke: no worker {args.worker_id!r} on the marketplace in {args.state}; "
                      "nothing was revoked (`campaign market worker add` adds one)", file=sys.stderr)
                return 2
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
            print(dumps({"WorkerId": args.worker_id, "code": code, "link": link}))
        else:
            print(f"worker {args.worker_id}: sign-in link {link}\nsign-in code {code}")
        return 0
    finally:
        close()
