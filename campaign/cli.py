"""The `campaign` command line: parses arguments and hands each command to one function.

Commands stay thin (the amti pattern): each one parses its flags and calls a single function in the
module that does the work, so every action is testable without the CLI. `bench NAME` and `market ...`
dispatch to `campaign.bench.<name>.main(argv)` and `campaign.market.server.main(argv)`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

BENCHES = ("market", "ranking", "mace", "nuggets", "quality", "dashboard")


def _bench(argv: Sequence[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: campaign bench {" + ",".join(BENCHES) + "} [options]")
        return 0 if argv else 2
    name = argv[0]
    if name not in BENCHES:
        print(f"campaign bench: unknown benchmark {name!r}; choose one of {', '.join(BENCHES)}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"campaign.bench.{name}")
    return int(module.main(list(argv[1:])) or 0)


def _market(argv: Sequence[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: campaign market serve [--host 127.0.0.1] [--port 8765] [--state DIR] ...")
        return 0 if argv else 2
    if argv[0] != "serve":
        print(f"campaign market: unknown command {argv[0]!r}; try 'campaign market serve'", file=sys.stderr)
        return 2
    from campaign.market import server

    return int(server.main(list(argv[1:])) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":
        return _bench(argv[1:])
    if argv and argv[0] == "market":
        return _market(argv[1:])
    from campaign import commands

    return commands.main(argv)
