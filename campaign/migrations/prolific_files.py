"""The Prolific adapter's files of the releases before schema 0004, read once into the store.

Those releases kept a Prolific campaign's journal beside the store, in `<state>/<campaign>/prolific/`:
`prolific-journal.sqlite` (tables studies, decisions, bonuses, bonus_checks) and `prolific-market.sqlite`
(posted, hit_types, verdicts). Revision 0004 made them tables of the store and reads the files of every
campaign the store holds from the state folder it was opened with, in the migration's transaction
(`import_files`). A store shared on PostgreSQL may be migrated by a daemon whose state folder holds
none of them: the Prolific provider calls `import_campaign` when it opens a campaign, which reads the
files still unread, so a campaign moved between releases loses nothing whichever daemon upgrades first.

Reading is idempotent: `Keys.PROLIFIC_FILES_IMPORTED` marks a campaign read (in the same transaction as
its rows), and a row whose key the store holds already is left as the store has it. The files are
opened read-only and left as they are: a backup of the store taken before the upgrade, with them, is
still a whole state for the previous release.

The tables are written as revision 0004 made them (not through the models, which later revisions may
change).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from campaign.state import Keys

JOURNAL_FILE = "prolific-journal.sqlite"
MARKET_FILE = "prolific-market.sqlite"
IMPORTED = Keys.PROLIFIC_FILES_IMPORTED


def _table(name: str, *columns: str) -> sa.TableClause:
    return sa.table(name, *(sa.column(c) for c in columns))


_KV = _table("kv", "campaign", "key", "value")
_CAMPAIGNS = _table("campaigns", "name")
# store table -> (file, the file's table, its columns as the store names them (file column AS name), the
# store's unique key within a campaign)
_COPIES: tuple[tuple[str, str, str, tuple[str, ...], str], ...] = (
    ("prolific_studies", JOURNAL_FILE, "studies",
     ("key", "internal_name", "completion_code", "study_id", "state", "places"), "key"),
    ("prolific_decisions", JOURNAL_FILE, "decisions", ("submission_id", "action", "state"), "submission_id"),
    ("prolific_bonuses", JOURNAL_FILE, "bonuses",
     ("key", "study_id", "submission_id", "cents", "batch_id", "state"), "key"),
    ("prolific_posted", MARKET_FILE, "posted", ("hit_id", "type_id", "assignments"), "hit_id"),
    ("prolific_hit_types", MARKET_FILE, "hit_types", ("type_id", "title", "description"), "type_id"),
    ("prolific_verdicts", MARKET_FILE, "verdicts", ("assignment_id", "decision", "reason"), "assignment_id"),
)


class LegacyFileError(Exception):
    """A Prolific journal file of the previous release cannot be read: the upgrade stops, nothing is changed."""


def files_of(state_dir: Path, campaign: str) -> tuple[Path, Path]:
    """Where the previous releases kept the campaign's journal and adapter files."""
    folder = state_dir / campaign / "prolific"
    return folder / JOURNAL_FILE, folder / MARKET_FILE


def _read(path: Path, table: str, columns: Iterable[str]) -> list[dict[str, Any]]:
    """The table's rows in the order they were written; none from a file without it (a release before the
    table existed)."""
    if not path.is_file():
        return []
    cols = list(columns)
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone():
                return []
            rows = conn.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY rowid").fetchall()
    except sqlite3.Error as exc:
        raise LegacyFileError(f"{path}: cannot read the Prolific journal of the previous release ({exc}); "
                              "restore it from a backup before upgrading") from None
    return [dict(zip(cols, r, strict=True)) for r in rows]


def _import(conn: Connection, state_dir: Path, campaign: str) -> int:
    """Copy the campaign's files into the store unless done before; the number of rows copied."""
    journal, market = files_of(state_dir, campaign)
    if not (journal.is_file() or market.is_file()):
        return 0
    # On PostgreSQL, two daemons opening the campaign at once: the second waits here, then finds the mark.
    conn.execute(sa.select(_CAMPAIGNS.c.name).where(_CAMPAIGNS.c.name == campaign).with_for_update())
    if conn.execute(sa.select(_KV.c.value).where(_KV.c.campaign == campaign, _KV.c.key == IMPORTED)).first() is not None:
        return 0
    copied = 0
    for store_table, file, table, columns, key in _COPIES:
        rows = _read(journal if file == JOURNAL_FILE else market, table, columns)
        if table == "bonuses":
            since = {r["key"]: r["since"] for r in _read(journal, "bonus_checks", ("key", "since"))}
            rows = [{**r, "checking_since": since.get(r["key"])} for r in rows]
        if not rows:
            continue
        target = _table(store_table, "campaign", *rows[0].keys())
        held = {str(v) for (v,) in conn.execute(sa.select(target.c[key]).where(target.c.campaign == campaign))}
        names: set[str] = set()
        if store_table == "prolific_studies":  # a study's internal name is unique in the whole store
            names = {str(v) for (v,) in conn.execute(sa.select(target.c.internal_name))}
        fresh = [{"campaign": campaign, **r} for r in rows if str(r[key]) not in held and str(r.get("internal_name")) not in names]
        for row in fresh:  # one by one: the ids keep the files' order
            conn.execute(target.insert().values(**row))
        copied += len(fresh)
    conn.execute(_KV.insert().values(campaign=campaign, key=IMPORTED, value="1"))
    return copied


def import_files(conn: Connection, state_dir: Path) -> dict[str, int]:
    """Read the files of every campaign in the store (revision 0004's upgrade); campaign -> rows copied."""
    names = [str(n) for (n,) in conn.execute(sa.select(_CAMPAIGNS.c.name).order_by(_CAMPAIGNS.c.name))]
    return {name: n for name in names if (n := _import(conn, state_dir, name))}


def import_campaign(engine: Engine, state_dir: Path, campaign: str) -> int:
    """Read the campaign's files if they are there and were not read yet (one transaction); rows copied."""
    journal, market = files_of(state_dir, campaign)
    if not (journal.is_file() or market.is_file()):
        return 0
    with engine.begin() as conn:
        return _import(conn, state_dir, campaign)
