"""Opening the store for the dashboard and `status` without creating one: shared by the command
line (`cli.py`) and the full-screen console (`app.py`), kept apart so neither imports the other."""

from __future__ import annotations

import sys
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
