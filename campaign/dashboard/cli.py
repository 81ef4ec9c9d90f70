"""`campaign dashboard` and `campaign status`: registration and the two commands' bodies.

Both only read. A store that is not there is not created: `status` in an empty folder says so and
exits 2, where opening the store would have left a fresh `state/campaign.db` behind.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from campaign.dashboard.stores import open_existing as open_existing
from campaign.dashboard.stores import sqlite_path as sqlite_path
from campaign.jsonout import dumps


def register(sub: argparse._SubParsersAction, common: Callable[[argparse.ArgumentParser], None]) -> None:
    d = sub.add_parser("dashboard", help="full-screen live console: spend, progress, quality, events; keys act on campaigns",
                       description="A full-screen console over the store (never the marketplace). Keys: arrows or j/k select a "
                                   "campaign, p pause/resume, c cancel (asks first), e export scores, w workers, / filter "
                                   "events, a mark warnings seen, q quit.")
    d.add_argument("--interval", type=float, default=1.0, help="seconds between reads of the store (default: 1.0)")
    common(d)


def cmd_dashboard(args: argparse.Namespace) -> int:
    from campaign.dashboard.app import run_dashboard

    return run_dashboard(args.state, args.db, args.interval)


def cmd_status(args: argparse.Namespace) -> int:
    if args.watch:
        from campaign.dashboard.app import run_dashboard

        return run_dashboard(args.state, args.db, args.interval)
    store = open_existing(args.state, args.db, "status")
    if store is None:
        return 2
    try:
        if args.json:
            from campaign.readmodel.figures import collect_figures

            print(dumps(collect_figures(store), indent=2, sort_keys=True))
            return 0
        from campaign.dashboard.view import render_once

        render_once(store)
        return 0
    finally:
        store.close()
