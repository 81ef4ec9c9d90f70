"""Owner-only modes for everything a campaign keeps on disk.

State folders hold answers, worker ids, completion codes and Prolific participants' PID/STUDY/SESSION
triples (a working credential while a submission is active), so no other local user may read them:
folders are 0700, databases and journals 0600, SQLite's side files (-wal, -shm, -journal) included.
SQLite gives the side files it creates the database file's own mode, so making the database 0600
before SQLite first opens it covers them; side files left by an older version are tightened on open.

Every place that creates a state folder or a database file calls `private_dir` / `private_db`. A folder
or file found looser than that (made by an older version, or by hand) is tightened, with a warning
naming it, so the operator learns that it was readable until now.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def _tighten(path: Path, mode: int) -> None:
    """chmod to `mode` if group or others have any access; a warning says what was open. A shared folder
    (sticky, like /tmp) or one owned by someone else is never changed: the warning says so instead."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return
    current = stat.S_IMODE(st.st_mode)
    if not current & 0o077:
        return
    if current & stat.S_ISVTX or st.st_uid != os.getuid():
        log.warning("%s is readable by other local users (mode %o) and is not ours to change; use a private "
                    "folder for campaign state", path, current)
        return
    try:
        os.chmod(path, mode)
    except PermissionError:
        log.warning("%s is readable by other local users (mode %o) and could not be changed", path, current)
        return
    log.warning("%s was readable by other local users (mode %o); now %o", path, current, mode)


def private_dir(path: str | os.PathLike[str]) -> Path:
    """The folder, created 0700 with any missing parents (each also 0700), or tightened to 0700. A file
    where the folder should be is refused (NotADirectoryError), never chmodded: `market serve --state F`
    on a file F once made the user's file mode 700."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(p))
    missing: list[Path] = []
    q = p
    while not q.exists() and q != q.parent:
        missing.append(q)
        q = q.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=DIR_MODE)
        except FileExistsError:  # made by another process meanwhile
            pass
        os.chmod(d, DIR_MODE)  # mkdir's mode is masked by the umask; the umask must not widen it either
    if not missing:
        _tighten(p, DIR_MODE)
    return p


def private_file(path: str | os.PathLike[str]) -> Path:
    """The file, created empty with mode 0600 if missing, or tightened to 0600."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
    except FileExistsError:
        _tighten(p, FILE_MODE)
    else:
        os.close(fd)
        os.chmod(p, FILE_MODE)
    return p


def private_db(path: str | os.PathLike[str]) -> Path:
    """A SQLite database file about to be opened: the file and its side files 0600, its folder created
    0700 if missing (an existing folder is the caller's: state folders go through `private_dir`)."""
    p = Path(path)
    if not p.parent.exists():
        private_dir(p.parent)
    private_file(p)
    for suffix in SQLITE_SIDE_FILES:
        _tighten(p.with_name(p.name + suffix), FILE_MODE)
    return p
