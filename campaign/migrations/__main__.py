"""`python -m campaign.migrations revision -m MESSAGE [--url URL]`: autogenerate a revision from the models.

The URL names a store at the current head (default: a fresh SQLite file in a temporary folder,
migrated to head first), so the new revision holds exactly the models' changes since then.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from alembic import command

from campaign.store import Store, alembic_config


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m campaign.migrations")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("revision", help="autogenerate a new revision from the models")
    r.add_argument("-m", "--message", required=True)
    r.add_argument("--url", default=None)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'campaign.db'}"
        Store(url).close()  # brings the store to head
        command.revision(alembic_config(url), message=args.message, autogenerate=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
