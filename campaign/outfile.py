"""Writing a file the user named with `--out`: whole or not at all, never a device replaced, and a clear
error instead of a traceback.

A regular file (or a new one) is written beside itself as `<name>.tmp` and renamed over the old one
only once every byte is on disk, so a crash or a full disk never leaves half an export where a whole
one was. Anything else the path names (`/dev/stdout`, a FIFO a script reads, a terminal) is written in
place: renaming over it would put a regular file where the device was (as root, for every user of
the machine: `--out /dev/stdout` once replaced the machine's `/dev/stdout` link). A symlink to a regular
file is followed, so the link stays a link.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path


class OutputError(Exception):
    """The named file could not be written; the message says which and why, and nothing was replaced."""


def write_out(path: Path, chunks: Iterable[str]) -> None:
    """Write `chunks` (text, UTF-8, newlines as given) to `path` (see the module docstring)."""
    target = Path(path)
    try:
        special = target.exists() and not target.is_file()
        if target.is_file():
            target = target.resolve()
        if special:
            with open(target, "w", encoding="utf-8", newline="") as fh:
                for chunk in chunks:
                    fh.write(chunk)
        else:
            atomic_write(target, chunks, keep_mode=True)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def atomic_write(path: Path, text: str | Iterable[str], *, keep_mode: bool = False) -> None:
    """Write `text` (or its chunks) beside `path` as `<name>.tmp`, fsync it and rename it over `path`,
    so a reader (or a crash) never sees half a file; with `keep_mode`, the file keeps the mode its owner
    gave it. On any failure the old file stays, no `.tmp` is left, and the error is raised as it was."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            for chunk in [text] if isinstance(text, str) else text:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        if keep_mode and path.is_file():
            shutil.copymode(path, tmp)
        tmp.replace(path)
    except BaseException:  # a full disk, rows that could not be read, an interrupt
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
