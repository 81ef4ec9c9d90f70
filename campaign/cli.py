"""The `campaign` command line's entry point (the console script and `python -m campaign`).

The commands themselves come from the modules in `campaign.commands.COMMAND_MODULES`, each adding its
parsers with `register(sub)`; this module only starts them.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence

from campaign.tools_cli import BENCHES, MARKET_COMMANDS

__all__ = ["BENCHES", "MARKET_COMMANDS", "main"]

#: A write that failed for want of room or a device error: one line for the user, not a traceback
WRITE_FAILURES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})
#: A path the user gave that cannot be made or opened (`--state` under a file, in a folder that does not
#: exist or that is not theirs): one line naming it, exit 2 as for any bad argument
PATH_FAILURES = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM, errno.ENAMETOOLONG,
                           errno.EEXIST})


def main(argv: Sequence[str] | None = None) -> int:
    from campaign.runlock import refuse_early

    # a second daemon on a state directory is refused before the parser imports the package
    refusal = refuse_early(sys.argv[1:] if argv is None else argv)
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return 2
    from campaign.commands import main as _main

    try:
        return _main(argv)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        _drop_stdout()
        return 0
    except OSError as exc:
        if exc.errno in PATH_FAILURES and exc.filename:
            why = exc.strerror or str(exc)
            if exc.errno == errno.EEXIST and os.path.isfile(exc.filename):  # a folder wanted where a file is
                why = "a file is there, not a folder"
            print(f"campaign: {exc.filename}: {why}", file=sys.stderr)
            return 2
        if exc.errno not in WRITE_FAILURES:
            raise
        _drop_stdout()  # most often standard output itself (`> file` on a full disk): nothing more goes there
        where = f" {exc.filename}" if exc.filename else ""
        print(f"campaign: cannot write{where}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if not _store_full(exc):
            raise
        print("campaign: cannot write: a database's disk is full (SQLite: database or disk is full); free some space "
              "and run the command again: what was written before stays", file=sys.stderr)
        return 1


def _store_full(exc: BaseException) -> bool:
    """SQLite's "database or disk is full", however wrapped (SQLAlchemy's OperationalError)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ == "OperationalError" and "database or disk is full" in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def _drop_stdout() -> None:
    """What is left unwritten goes nowhere, so the interpreter's last flush at exit fails no more."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):  # no descriptor (a test's captured stdout): nothing is flushed to one
        pass
