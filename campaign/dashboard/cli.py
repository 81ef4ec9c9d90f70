"""`campaign dashboard` and `campaign status`: registration and the two commands' bodies.

Both only read. A store that is not there is not created: `status` in an empty folder says so and
exits 2, where opening the store would have left a fresh `state/campaign.db` behind.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from campaign.store import Store


def sqlite_path(state: str, db: str | None) -> Path | None:
    """The file a SQLite store lives in (None for a server URL such as PostgreSQL)."""
    if db is None:
        return Path(state) / "campaign.db"
    if db.startswith("sqlite:///"):
        return Path(db[len("sqlite:///"):])
    return None


def open_existing(state: str, db: str | None, cmd: str) -> Store | None:
    """The store if it exists; otherwise None after saying where none was found (nothing is created)."""
    path = sqlite_path(state, db)
    if path is not None and not path.is_file():
        print(f"campaign {cmd}: no campaign store at {path} (start one with `campaign run`, or pass --state DIR / --db URL)",
              file=sys.stderr)
        return None
    from campaign.store import Store

    return Store.open(state, db)


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
            from campaign.dashboard.figures import collect_figures

            print(json.dumps(collect_figures(store), indent=2, sort_keys=True))
            return 0
        from campaign.dashboard.view import render_once

        render_once(store)
        return 0
    finally:
        store.close()
