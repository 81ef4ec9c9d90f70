"""`campaign simulate`: the command around `campaign.simulate` (flags, progress bar, table or JSON)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from campaign import argtypes
from campaign.evaluate.cli import _non_negative
from campaign.jsonout import dumps
from campaign.progress_bar import bar_on_terminal


def _share(text: str) -> float:
    value = _non_negative(text)
    if value > 1.0:
        raise argparse.ArgumentTypeError(f"a share from 0 to 1, got {text}")
    return value


def _runs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number of runs, got {text!r}") from None
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"from 1 to 1000 runs, got {value}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="run the spec N times against a simulated crowd on virtual time and show what "
                                        "it buys (spend, duration, workers, exclusions, reliability); writes no state")
    p.add_argument("--config", default="campaigns.yaml", help="the spec file")
    p.add_argument("--campaign", action="append", default=[], metavar="NAME", help="simulate only this campaign (repeatable)")
    p.add_argument("--runs", type=_runs, default=10, metavar="N", help="how many simulated runs (seeds SEED, SEED+1, ...)")
    p.add_argument("--seed", type=argtypes.seed, default=0, help="seed of the first run")
    p.add_argument("--adversaries", type=_share, default=None, metavar="SHARE",
                   help="share of the simulated workers who misbehave (default: the spec's own crowd.adversaries)")
    p.add_argument("--jobs", type=argtypes.positive, default=None, metavar="J", help="runs at once (default: one per core)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_simulate)


def cmd_simulate(args: argparse.Namespace) -> int:
    from campaign.simulate import SimulateError, simulate
    from campaign.spec import SpecError

    bar = bar_on_terminal("simulating")
    try:
        result = simulate(args.config, args.campaign, args.runs, args.seed, args.adversaries, jobs=args.jobs,
                          progress=bar.update if bar else None)
    except (SpecError, SimulateError) as exc:
        print(f"campaign simulate: {exc}", file=sys.stderr)
        return 2
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print(dumps(result))
    else:
        _table(result)
    return 0


def _span(fig: dict[str, Any] | None, digits: int = 1) -> str:
    if fig is None:
        return "-"
    return f"{fig['median']:.{digits}f} ({fig['p10']:.{digits}f}-{fig['p90']:.{digits}f})"


def _table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"{result['runs']} simulated runs of {result['config']} (seeds {result['seeds'][0]}-{result['seeds'][-1]}); "
                  "median (10th-90th percentile)")
    for name, summary in result["campaigns"].items():
        table = Table(title=name)
        for head in ("stage", "spend", "hours", "workers", "answers excluded", "reliability"):
            table.add_column(head, justify="left" if head == "stage" else "right")
        parts = list(summary["stages"].items()) + [("total", summary["total"])]
        for part, fig in parts:
            spend = fig["spend"]
            rel = _span(fig["reliability"], 2)
            table.add_row(part, f"{spend['median']} ({spend['p10']}-{spend['p90']})", _span(fig["hours"]),
                          _span(fig["workers"], 0), _span(fig["answers_excluded"], 0),
                          f"{rel} {fig['reliability_kind']}" if fig["reliability"] else "-")
        console.print(table)
