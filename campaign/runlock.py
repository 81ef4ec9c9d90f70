"""One daemon per SQLite state directory.

SQLite is one file on one machine: two `campaign run` processes on it would both post, both review and
both write `scores.csv` (seen: duplicate `finished` events, an IntegrityError, a rename race). An
exclusive `flock` on `<state>/daemon.lock` makes the second one refuse at once, naming the first. The
kernel drops the lock when its process dies, even by SIGKILL, so a crash never leaves a stale lock.
Several daemons sharing a PostgreSQL store divide campaigns by leases instead (`campaign.leases`).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from campaign.filemodes import private_dir


class AlreadyRunning(RuntimeError):
    """Another daemon holds this state directory."""


@contextmanager
def state_lock(state_dir: Path) -> Iterator[None]:
    private_dir(state_dir)
    path = state_dir / "daemon.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AlreadyRunning(_describe(path, state_dir)) from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}).encode())
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def probe(state_dir: Path) -> None:
    """Raise AlreadyRunning when another daemon holds `state_dir`'s lock; create nothing.

    For `campaign run` to refuse within a fraction of a second, before the spec, the store and the
    marketplace are loaded (which took 9-22 s on a busy machine). The real lock is still taken by
    `state_lock`: a daemon starting between the probe and it is caught there.
    """
    path = state_dir / "daemon.lock"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # no lock file: nobody has run here (or it cannot be read, and state_lock will say so)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AlreadyRunning(_describe(path, state_dir)) from None
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def refuse_early(argv: Sequence[str]) -> str | None:
    """The refusal for a `campaign run` whose state directory another daemon holds, or None.

    Reads only `run`, `--state` and `--db` from the raw arguments (the full parser imports the whole
    package); anything it cannot read simply falls through to the normal path, which locks properly.
    """
    args = list(argv)
    if not args or args[0] != "run" or "-h" in args or "--help" in args:
        return None
    state, db = "state", None
    for k, a in enumerate(args):
        for flag in ("--state", "--db"):
            value = a.split("=", 1)[1] if a.startswith(flag + "=") else args[k + 1] if a == flag and k + 1 < len(args) else None
            if value is not None:
                state, db = (value, db) if flag == "--state" else (state, value)
    if db is not None and not db.startswith("sqlite"):
        return None  # a shared store: daemons divide campaigns by leases, no lock
    try:
        probe(Path(state))
    except AlreadyRunning as exc:
        return f"campaign run: {exc}"
    return None


def _describe(path: Path, state_dir: Path) -> str:
    try:
        info = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        info = {}
    who = f"pid {info.get('pid', '?')} on {info.get('host', '?')}"
    if "started" in info:
        who += ", started " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(info["started"])))
    return (f"another campaign daemon ({who}) is already running on {state_dir}; stop it first, or give this "
            "one another --state (several daemons can share one store only on PostgreSQL, with --db)")
