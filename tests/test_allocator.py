"""`campaign.allocator`: malloc's free pages handed back, at most so often."""

from __future__ import annotations

import os
import threading

import pytest

from campaign import allocator

glibc = pytest.mark.skipif(allocator._LIBC is None, reason="malloc_trim and mallopt's arena cap are glibc's (this is not glibc)")


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@glibc
def test_trim_gives_back_the_free_pages_in_the_middle_of_an_arena() -> None:
    # 2 KiB blocks (malloc's, not Python's small-object arenas) made on a thread, so they come from a
    # thread's arena, which never shrinks on free; every 64th kept, so no page at the top is wholly free
    # and what is freed can only go back from the middle of the arena
    kept: list[bytes] = []

    def fill() -> None:
        blocks = [os.urandom(1) * 2048 for _ in range(40_000)]
        kept.extend(blocks[::64])
        del blocks

    t = threading.Thread(target=fill)
    t.start()
    t.join()
    before = _rss()
    assert allocator.trim()
    after = _rss()
    assert before - after > 40 * 2**20  # of the ~80 MiB freed
    assert len(kept) == 625


@glibc
def test_the_arena_cap_is_accepted() -> None:
    assert allocator.limit_arenas(allocator.ARENAS)


def test_a_trimmer_trims_at_most_once_in_its_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(allocator, "trim", lambda: calls.append(1) or True)
    now = [100.0]
    monkeypatch.setattr(allocator.time, "monotonic", lambda: now[0])
    t = allocator.Trimmer(every=2.0)
    t.maybe()
    t.maybe()
    now[0] += 1.9
    t.maybe()
    assert len(calls) == 1
    now[0] += 0.2
    t.maybe()
    assert len(calls) == 2
