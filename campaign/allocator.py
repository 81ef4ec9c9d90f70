"""The C allocator's part of a long-running daemon's size (glibc's malloc; elsewhere these do nothing).

A daemon's Python objects live in Python's own arenas, but numpy's columns and temporaries, psycopg's
result buffers and every block larger than 512 bytes come from malloc. glibc gives each thread that
allocates while another holds an arena's lock an arena of its own (up to eight a core), and keeps what
is freed inside them for reuse: at 470,000 propositions the daemons' size grew by ~45 MiB over the run
while the blocks Python held grew by ~8 (the C heap and anonymous maps outside Python's arenas).
Two things keep that down: few arenas (the pass threads share them; they spend most of their time
waiting on the store and the marketplace, so there is little lock contention to save), and handing the
free pages back to the system now and then (`malloc_trim`, which since glibc 2.8 also releases whole
free pages in the middle of every arena, not only at the heap's top).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import time
from typing import Any

M_ARENA_MAX = -8  # mallopt's parameter number (malloc.h)
ARENAS = 2  # a daemon's malloc arenas: the main one and one for its threads
TRIM_EVERY = 2.0  # wall seconds at least between two trims


def _glibc() -> Any | None:
    """The C library when it is glibc (the only one with `malloc_trim` and these `mallopt` numbers)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 - a glibc-only symbol: musl has malloc_trim as a stub
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.malloc_trim.restype = ctypes.c_int
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.mallopt.restype = ctypes.c_int
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _glibc()


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap malloc's arenas for the threads started after this call; True when the cap was set."""
    if _LIBC is None:
        return False
    return bool(_LIBC.mallopt(M_ARENA_MAX, arenas))


def trim() -> bool:
    """Give the free pages of every malloc arena back to the system; True when some were."""
    if _LIBC is None:
        return False
    return bool(_LIBC.malloc_trim(0))


class Trimmer:
    """`trim` at most once every `every` seconds: asked on every wake-up of the daemon's main loop."""

    def __init__(self, every: float = TRIM_EVERY) -> None:
        self.every = every
        self._next = 0.0

    def maybe(self) -> None:
        if time.monotonic() >= self._next:
            trim()
            self._next = time.monotonic() + self.every
