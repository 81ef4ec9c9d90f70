"""`campaign crowd run`: the simulated crowd as its own process, working a marketplace others post to.

When several daemons share one store they must also share one marketplace and one crowd, or each would
see only its own HITs and the answers would depend on which daemon posted what. So the built-in
marketplace runs standalone (`campaign market serve`) and the crowd runs here, built from the same spec
exactly as `campaign run` builds its in-process crowd: same workers, same hidden truth, same seed.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from campaign.clock import Clock, ScaledClock, WallClock
from campaign.spec import Campaign, SpecError, load_spec

if TYPE_CHECKING:
    from campaign.crowd.runner import SimulatedCrowd
    from campaign.market.worker_client import WorkerClient


def build_crowd(campaigns: Sequence[Campaign], seed: int, endpoint: str, clock: Clock, poll: float = 0.05,
                client: WorkerClient | None = None) -> SimulatedCrowd:
    """One crowd for every simulated campaign of a spec; each campaign brings its own workers (as in
    `campaign run`, whose pool seeds these are, so both crowds are the same people)."""
    from campaign.crowd.adversaries import assign
    from campaign.crowd.models import make_pool, stable_seed
    from campaign.crowd.runner import SimulatedCrowd
    from campaign.inputs import load_items, load_truth

    by_text: dict[str, float] = {}
    workers = []
    adversaries: dict[str, str] = {}
    for c in campaigns:
        truth = load_truth(c.crowd.truth) if c.crowd.truth else {}
        for it in load_items(c.input_kind, c.input_path):
            by_text[it.text] = truth.get(it.key, 0.5)
        pool_seed = seed if len(campaigns) == 1 else stable_seed(seed, c.name) % 2**31
        pool = make_pool(c.crowd.workers, pool_seed, dict(c.crowd.mix), arrival_span=c.crowd.arrival_span)
        adversaries.update(assign(pool, c.crowd.adversaries, pool_seed))
        workers += pool
    return SimulatedCrowd(endpoint, workers, by_text, seed=seed, clock=clock, poll=poll, client=client,
                          adversaries=adversaries)


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("crowd", help="the simulated crowd as its own process (for a standalone marketplace)",
                       description="The simulated crowd of a spec's `crowd: {kind: simulated}` campaigns, working a "
                                   "marketplace given by URL. Run `campaign crowd run --help` for the options.")
    csub = c.add_subparsers(dest="crowd_cmd", required=True, metavar="SUBCOMMAND", title="subcommands")
    r = csub.add_parser("run", help="work the marketplace's HITs until stopped (SIGINT/SIGTERM)")
    r.add_argument("--config", default="campaigns.yaml", help="the spec whose simulated crowds to run")
    r.add_argument("--endpoint", required=True, help="the marketplace's URL (what `campaign market serve` prints)")
    r.add_argument("--market-state", required=True, metavar="DIR",
                   help="the marketplace's --state: its operator signs the simulated workers up (workers cannot "
                        "sign themselves up), so the crowd runs on the marketplace's machine")
    r.add_argument("--seed", type=int, default=0, help="the seed the daemons run with (`campaign run --seed`)")
    r.add_argument("--campaign", action="append", default=[], metavar="NAME", help="only this campaign's crowd (repeatable)")
    r.add_argument("--speed", type=float, default=None,
                   help="clock speed-up; give the marketplace's `--speed` (default: the spec's fastest crowd speed)")
    r.set_defaults(func=cmd_crowd_run)


def cmd_crowd_run(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(args.config)
    except SpecError as exc:
        for line in exc.problems:
            print(line, file=sys.stderr)
        return 2
    chosen = [c for c in spec.campaigns if c.crowd.kind == "simulated" and (not args.campaign or c.name in args.campaign)]
    if not chosen:
        print(f"campaign crowd run: no campaign with a simulated crowd in {args.config}", file=sys.stderr)
        return 2
    speed = args.speed if args.speed is not None else max(c.crowd.speed for c in chosen)
    clock: Clock = WallClock() if speed == 1.0 else ScaledClock(speed, start=time.time())
    from pathlib import Path

    from campaign.market.operator import offline
    from campaign.market.worker_client import WorkerClient

    operator, close_operator = offline(Path(args.market_state))
    crowd = build_crowd(chosen, args.seed, args.endpoint, clock, client=WorkerClient(args.endpoint, operator=operator))
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    crowd.start()
    print(f"crowd of {len(crowd.workers)} workers at work on {args.endpoint}", flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        crowd.stop()
        close_operator()
    s = crowd.stats
    print(f"crowd stopped: {s.submitted} answers submitted, {s.returned} returned, {s.errors} errors", flush=True)
    return 0
