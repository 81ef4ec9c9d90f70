"""`campaign crowd run`: the simulated crowd as its own process, working a marketplace others post to, or
playing Prolific participants on a standalone emulator (`--prolific-url`, `campaign.crowd.prolific_crowd`).

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
from pathlib import Path
from typing import TYPE_CHECKING

from campaign import argtypes
from campaign.clock import Clock, ScaledClock, WallClock
from campaign.spec import Campaign, SpecError, load_spec

if TYPE_CHECKING:
    from campaign.crowd.runner import SimulatedCrowd
    from campaign.market.worker_client import WorkerClient


DEFAULT_THREADS = 4
MAX_THREADS = 64


def build_crowd(campaigns: Sequence[Campaign], seed: int, endpoint: str, clock: Clock, poll: float = 0.05,
                client: WorkerClient | None = None, threads: int = 1) -> SimulatedCrowd:
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
                          adversaries=adversaries, threads=threads)


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("crowd", help="the simulated crowd as its own process (for a standalone marketplace)",
                       description="The simulated crowd of a spec's `crowd: {kind: simulated}` campaigns, working a "
                                   "marketplace given by URL, or playing Prolific participants on a Prolific emulator "
                                   "(`campaign prolific serve`). Run `campaign crowd run --help` for the options.")
    csub = c.add_subparsers(dest="crowd_cmd", required=True, metavar="SUBCOMMAND", title="subcommands")
    r = csub.add_parser("run", help="work the marketplace's HITs until stopped (SIGINT/SIGTERM)")
    r.add_argument("--config", default="campaigns.yaml", help="the spec whose simulated crowds to run")
    r.add_argument("--endpoint", default=None, help="the marketplace's URL (what `campaign market serve` prints); "
                   "needed for the spec's campaigns on the built-in marketplace")
    r.add_argument("--market-state", default=None, metavar="DIR",
                   help="the marketplace's --state: its operator signs the simulated workers up (workers cannot "
                        "sign themselves up), so the crowd runs on the marketplace's machine")
    r.add_argument("--prolific-url", default=None, metavar="URL",
                   help="play Prolific participants on the emulator at URL (what `campaign prolific serve` prints as "
                        "PROLIFIC_BASE_URL; default: $PROLIFIC_BASE_URL) for the spec's `marketplace: prolific` campaigns "
                        "with a simulated crowd; the emulator's token is read from $PROLIFIC_TOKEN")
    r.add_argument("--prolific-token-file", default=None, metavar="FILE", type=Path,
                   help="read the emulator's token from FILE (its --state DIR/token) instead of $PROLIFIC_TOKEN")
    r.add_argument("--seed", type=argtypes.seed, default=0, help="the seed the daemons run with (`campaign run --seed`)")
    r.add_argument("--campaign", action="append", default=[], metavar="NAME", help="only this campaign's crowd (repeatable)")
    r.add_argument("--speed", type=float, default=None,
                   help="clock speed-up (default: the spec's fastest crowd speed); on the built-in marketplace its own "
                        "clock is followed and a --speed that differs is refused")
    r.add_argument("--threads", type=_threads, default=DEFAULT_THREADS, metavar="N",
                   help=f"HITs worked at once on the built-in marketplace (default {DEFAULT_THREADS}): people work side by "
                        "side; one thread's pace is the marketplace's latency. Who answers what does not depend on it")
    r.set_defaults(func=cmd_crowd_run)


def _threads(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= n <= MAX_THREADS:
        raise argparse.ArgumentTypeError(f"{n} is outside 1-{MAX_THREADS}")
    return n


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
    on_prolific = [c for c in chosen if c.marketplace == "prolific"]
    on_market = [c for c in chosen if c.marketplace != "prolific"]
    if on_market and not (args.endpoint and args.market_state):
        print(f"campaign crowd run: {', '.join(c.name for c in on_market)} work the built-in marketplace: give "
              "--endpoint and --market-state", file=sys.stderr)
        return 2
    speed = args.speed if args.speed is not None else max(c.crowd.speed for c in chosen)
    clock: Clock = WallClock() if speed == 1.0 else ScaledClock(speed, start=time.time())
    if on_market:  # the marketplace keeps the time: its own clock, not one started here seconds later
        from campaign.marketplaces.remote_clock import ClockUnavailable, marketplace_clock

        try:
            clock = marketplace_clock(args.endpoint)
        except ClockUnavailable as exc:
            print(f"campaign crowd run: {exc}", file=sys.stderr)
            return 2
        if args.speed is not None and args.speed != clock.speed:
            print(f"campaign crowd run: --speed {args.speed:g}, but the marketplace at {args.endpoint} runs at speed "
                  f"{clock.speed:g}: leave --speed out (the marketplace's is followed) or give its own", file=sys.stderr)
            return 2
    participants = None
    if on_prolific:
        from campaign.crowd.prolific_crowd import ProlificCrowdError, participant_crowds

        try:
            participants = participant_crowds(on_prolific, args.seed, clock, args.prolific_url,
                                              args.prolific_token_file)
        except ProlificCrowdError as exc:
            print(f"campaign crowd run: {exc}", file=sys.stderr)
            return 2
    from campaign.market.operator import offline
    from campaign.market.worker_client import WorkerClient

    crowd = None
    close_operator = None
    if on_market:
        operator, close_operator = offline(Path(args.market_state))
        crowd = build_crowd(on_market, args.seed, args.endpoint, clock, client=WorkerClient(args.endpoint, operator=operator),
                            threads=args.threads)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    try:
        if crowd is not None:
            crowd.start()
            print(f"crowd of {len(crowd.workers)} workers at work on {args.endpoint}", flush=True)
        for pc in participants or []:
            pc.start()
            print(f"crowd of {len(pc.workers)} Prolific participants at work on {pc.root} (task site {pc.site})", flush=True)
        while not done.wait(0.5):
            pass
    finally:
        for pc in participants or []:
            pc.stop()
        if crowd is not None:
            crowd.stop()
        if close_operator is not None:
            close_operator()
    if crowd is not None:
        s = crowd.stats
        print(f"crowd stopped: {s.submitted} answers submitted, {s.returned} returned, {s.errors} errors", flush=True)
    for pc in participants or []:
        p = pc.stats
        print(f"participants stopped: {p.started} places taken, {p.completed} completed, {p.submitted} answers submitted, "
              f"{p.returned} returned, {p.abandoned} abandoned, {p.errors} errors", flush=True)
    return 0
