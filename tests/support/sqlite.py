"""Reading a run's SQLite files from a test, read-only, while or after the servers that own them run."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def count(db: Path, sql: str) -> int:
    """The single number a `SELECT COUNT(*) ...` on `db` answers (opened read-only: the test never writes)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(con.execute(sql).fetchone()[0])
    finally:
        con.close()
