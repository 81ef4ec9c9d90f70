"""`campaign prolific serve`: the Prolific API emulator as a standalone server, for hands-on work and for
runs on the real road (`marketplace: prolific` with `PROLIFIC_BASE_URL` pointing at it).

It prints where it listens and the researcher token to use, as two lines a shell can export
(`PROLIFIC_BASE_URL=...`, `PROLIFIC_TOKEN=...`): the token is the emulator's own, made on first start
and kept (mode 0600) in the state directory, so a restart on the same state accepts the same one. It
serves until SIGINT or SIGTERM. The arguments are kept light here (the server is imported only to run).
"""

from __future__ import annotations

import argparse
import signal
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

from campaign import argtypes

EXCHANGES = "exchanges.jsonl"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--host", default="127.0.0.1", help="address to bind")
    ap.add_argument("--port", type=argtypes.port, default=8766, help="port to bind (0: any free port)")
    ap.add_argument("--state", type=Path, default=Path("state/prolific"), help="state directory")
    ap.add_argument("--fee-rate", type=Decimal, default=Decimal("0.333"), help="service fee as a share of rewards and bonuses")
    ap.add_argument("--vat-rate", type=Decimal, default=Decimal("0"), help="VAT as a share of the fee")
    ap.add_argument("--balance", type=argtypes.count, default=1_000_000, help="workspace balance in minor units (pence/cents)")
    ap.add_argument("--currency", choices=("GBP", "USD"), default="GBP", help="the workspace's currency")
    ap.add_argument("--speed", type=float, default=1.0, help="clock speed-up (1.0 = wall clock)")
    ap.add_argument("--bonus-delay", type=float, default=60.0,
                    help="seconds before a paid bonus shows on the submission (Prolific pays asynchronously)")
    ap.add_argument("--record-exchanges", action="store_true",
                    help=f"append every research-API request and its answer to STATE/{EXCHANGES} (JSON lines: method, path, "
                         "query, body, status, answer; never a header, so never the token), for checking them against "
                         "Prolific's API description afterwards")


def serve(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    from campaign.clock import Clock, ScaledClock, WallClock
    from campaign.prolific.emulator.server import start_emulator

    clock: Clock = WallClock() if args.speed == 1.0 else ScaledClock(args.speed)
    em = start_emulator(args.state, clock, fee_rate=args.fee_rate, vat_rate=args.vat_rate, balance_minor=args.balance,
                        currency=args.currency, host=args.host, port=args.port, bonus_delay=args.bonus_delay,
                        deliver_hooks=True)  # webhooks are sent as Prolific sends them: on their own
    if args.record_exchanges:
        em.app.observers.append(exchange_recorder(Path(args.state) / EXCHANGES))
    done = stop or threading.Event()
    if stop is None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: done.set())
    print(f"Prolific emulator serving (state in {args.state}); participants are added at {em.root_url}/emulator/participants",
          flush=True)
    print(f"PROLIFIC_BASE_URL={em.base_url}", flush=True)
    print(f"PROLIFIC_TOKEN={em.token}", flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        em.stop()
    return 0


def exchange_recorder(path: Path) -> Any:
    """An `EmulatorApp` observer appending each research-API exchange (`/api/...`) to `path` as one JSON
    line. The participant side channel (`/emulator/...`) is left out: it is the emulator's own, not
    Prolific's API, and its answers carry participants' secrets. Headers are never written."""
    import json

    from campaign.web.request import Request, Response

    lock = threading.Lock()
    out = path.open("a", encoding="utf-8")

    def parsed(raw: bytes | None) -> Any:
        if not raw or not raw.strip():
            return None
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return raw.decode("utf-8", "replace")

    def record(request: Request, response: Response) -> None:
        if not request.path.startswith("/api/"):
            return
        line = json.dumps({"method": request.method, "path": request.path, "query": request.query_dict(),
                           "body": parsed(request.body), "status": response.status, "answer": parsed(response.body)})
        with lock:
            out.write(line + "\n")
            out.flush()
    return record


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="campaign prolific serve", description="Run the Prolific API emulator standalone.")
    add_arguments(ap)
    return serve(ap.parse_args(argv))
