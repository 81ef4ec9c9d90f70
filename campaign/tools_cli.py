"""`campaign market ...` and `campaign bench ...`: subcommands that hand their arguments on untouched to
the marketplace's and the benchmarks' own parsers (one line each in the tables below); `campaign
prolific serve`, the Prolific API emulator standalone (`campaign.prolific.serve`).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

#: `campaign bench NAME` runs `campaign.bench.NAME.main(argv)`; one line each, shown by `campaign bench --help`.
BENCHES: dict[str, str] = {
    "market": "throughput, latency and memory of the built-in marketplace under a campaign's load",
    "aggregation": "`auto` vs majority vote, MACE and Dawid-Skene on simulated crowds (and --real: the real sets)",
    "ranking": "random pairs vs random 5-item rankings vs adaptive batches: Spearman and top-k precision",
    "prior": "a ranking's comparisons with and without a source stage's evidence, on UKPConvArg1's real judgements",
    "mace": "MACE vs majority vote on Snow et al. (2008) RTE/TEMP/WSD and UKPConvArg1",
    "nuggets": "seed 002's gold nuggets and agreement recomputed from its raw crowd data",
    "quality": "the Likert stage at 0/10/25% spammers, with and without the quality policy",
    "dashboard": "one dashboard redraw on a campaign of 20,000 HITs",
    "hostile": "a spec's campaigns (examples/hostile.yaml) with and without its adversarial crowd: quality, stalls, unearned pay",
    "prolific": "a Prolific spec (examples/prolific.yaml) per seed: place waits, undecided submissions, places paid per used, ledger vs charges",
    "scale": "a Likert campaign of N propositions through `campaign run`: wall time, memory, ticks, auto-approvals",
}

#: `campaign market NAME ...` runs the function named here with the remaining arguments.
MARKET_COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("campaign.providers.prolific_door:market_serve", "run the built-in MTurk-compatible marketplace as a standalone server"),
    "account": ("campaign.market.server:account_main", "requester accounts: `account add NAME` writes its keys to STATE/credentials"),
    "worker": ("campaign.market.server:worker_main", "workers: `worker add WORKER_ID` sets the profile and prints a sign-in link"),
}


def _call(target: str, argv: Sequence[str]) -> int:
    module, _, func = target.partition(":")
    return int(getattr(importlib.import_module(module), func)(list(argv)) or 0)


def _bench(args: argparse.Namespace) -> int:
    return _call(f"campaign.bench.{args.bench}:main", args.rest)


def _prolific_serve(args: argparse.Namespace) -> int:
    from campaign.prolific.serve import serve

    return serve(args)


def _market(args: argparse.Namespace) -> int:
    return _call(MARKET_COMMANDS[args.market_cmd][0], args.rest)


def register(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("market", help="the built-in marketplace (serve it standalone)",
                       description="The built-in MTurk-compatible marketplace. "
                                   "Run `campaign market SUBCOMMAND --help` for a subcommand's options.")
    msub = m.add_subparsers(dest="market_cmd", required=True, metavar="SUBCOMMAND", title="subcommands")
    for name, (_target, text) in MARKET_COMMANDS.items():
        sp = msub.add_parser(name, help=text.replace("%", "%%"), add_help=False, description=text.replace("%", "%%"))
        sp.set_defaults(func=_market, passthrough=True)

    from campaign.prolific.serve import add_arguments

    pr = sub.add_parser("prolific", help="the Prolific API emulator (serve it standalone)",
                        description="The Prolific API emulator. Run `campaign prolific serve --help` for its options.")
    prsub = pr.add_subparsers(dest="prolific_cmd", required=True, metavar="SUBCOMMAND", title="subcommands")
    serve = prsub.add_parser("serve", help="serve the emulator standalone and print its URL and token",
                             description="Serve the Prolific API emulator standalone; prints PROLIFIC_BASE_URL and PROLIFIC_TOKEN.")
    add_arguments(serve)
    serve.set_defaults(func=_prolific_serve)

    b = sub.add_parser("bench", help="benchmarks that print numbers (--json for machines)",
                       description="Benchmarks that print numbers. Run `campaign bench NAME --help` for a benchmark's options.")
    bsub = b.add_subparsers(dest="bench", required=True, metavar="NAME", title="benchmarks")
    for name, text in BENCHES.items():
        sp = bsub.add_parser(name, help=text.replace("%", "%%"), add_help=False, description=text.replace("%", "%%"))
        sp.set_defaults(func=_bench, passthrough=True)
