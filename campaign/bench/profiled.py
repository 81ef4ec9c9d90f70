"""`python -m campaign.bench.profiled OUT KIND ARGS...`: `campaign ARGS` under a profiler, for
`campaign bench scale` with CAMPAIGN_BENCH_PROFILE=cpu|mem (the bench starts its daemons this way).

KIND `cpu`: cProfile in every thread (the daemon's passes run on its scheduler's threads, not the main
one: each thread gets its own profiler, merged at the end); OUT.prof (pstats) and OUT.txt (the 40
functions with the most cumulative time and the 40 with the most own time). KIND `mem`: tracemalloc; every 60 s and at exit OUT.txt gets
the 25 source lines (or tracebacks) holding the most memory now, so what grows is seen as it grows. Tracing every
allocation from the start slows a daemon planning 20 campaigns tenfold; CAMPAIGN_BENCH_MEM_AFTER=S
starts it S seconds in (what is held then is not traced: the report shows what grew since) and
CAMPAIGN_BENCH_MEM_FRAMES=N groups by the N innermost frames (default 1: by line). KIND `malloc`:
every 60 s OUT.txt gets the process's RSS and Python's own allocator figures (arenas held and their
high-water mark, bytes in live blocks, bytes free inside them): RSS far above the live bytes is memory
kept by fragmentation, not by what the daemon holds.
Written when the command returns (the daemon's normal end, or SIGTERM turned into SystemExit).
"""

from __future__ import annotations

import io
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path


def _mem_report(out: Path, stop: threading.Event, after: float, frames: int) -> None:
    import tracemalloc

    started = time.monotonic()
    if stop.wait(after):
        return
    tracemalloc.start(max(1, frames))
    group = "lineno" if frames <= 1 else "traceback"
    with out.open("w") as fh:
        while True:
            last = stop.wait(60)
            snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
            stats = snap.statistics(group)
            total = sum(s.size for s in stats)
            fh.write(f"--- {time.monotonic() - started:.0f} s: {total / 2**20:.1f} MiB traced\n")
            for s in stats[:25]:
                where = " <- ".join(str(f) for f in reversed(s.traceback))  # the innermost frame first
                fh.write(f"{s.size / 2**20:8.1f} MiB {s.count:>9} blocks  {where}\n")
            fh.flush()
            if last:
                return


_MALLOC_FIGURES = ("# arenas allocated current", "# arenas highwater mark", "# bytes in allocated blocks",
                   "# bytes in available blocks", "unused pools")


def _malloc_figures() -> dict[str, int]:
    """`sys._debugmallocstats()`'s totals (it writes to file descriptor 2, so that is pointed at a file
    for the call; a log line another thread writes meanwhile lands there too)."""
    import os
    import tempfile

    with tempfile.TemporaryFile(mode="w+") as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(tmp.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        out: dict[str, int] = {}
        for line in tmp:
            for name in _MALLOC_FIGURES:
                if line.startswith(name) or (name == "unused pools" and name in line):
                    out[name] = int(line.rsplit("=", 1)[1].replace(",", "").strip())
        return out


def _malloc_report(out: Path, stop: threading.Event) -> None:
    started = time.monotonic()
    with out.open("w") as fh:
        while True:
            last = stop.wait(60)
            got = _malloc_figures()
            with open("/proc/self/status") as st:
                rss = next((int(line.split()[1]) for line in st if line.startswith("VmRSS:")), 0)
            fh.write(f"{time.monotonic() - started:6.0f} s  rss {rss / 1024:7.1f} MiB  arenas {got.get('# arenas allocated current', 0)}"
                     f" (high {got.get('# arenas highwater mark', 0)})  live {got.get('# bytes in allocated blocks', 0) / 2**20:7.1f} MiB"
                     f"  free in pools {got.get('# bytes in available blocks', 0) / 2**20:6.1f} MiB"
                     f"  unused pools {got.get('unused pools', 0) / 2**20:6.1f} MiB\n")
            fh.flush()
            if last:
                return


def _reporting(report: Callable[[threading.Event], None], run: Callable[[list[str]], int], args: list[str]) -> int:
    """`run(args)` with `report` writing beside it on its own thread until it returns."""
    stop = threading.Event()
    t = threading.Thread(target=report, args=(stop,), daemon=True)
    t.start()
    try:
        return run(args)
    finally:
        stop.set()
        t.join()


def main(argv: list[str]) -> int:
    out, kind, args = Path(argv[0]), argv[1], argv[2:]

    def campaign_main(arguments: list[str]) -> int:
        """`python -m campaign ARGUMENTS` in this process (run as the module is, so this bench does not
        import the command line above it)."""
        import runpy

        sys.argv = ["campaign", *arguments]
        try:
            runpy.run_module("campaign", run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return 0

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    report = out.with_suffix(".txt")
    if kind == "malloc":
        return _reporting(lambda stop: _malloc_report(report, stop), campaign_main, args)
    if kind == "mem":
        import os

        after = float(os.environ.get("CAMPAIGN_BENCH_MEM_AFTER") or 0)
        frames = int(os.environ.get("CAMPAIGN_BENCH_MEM_FRAMES") or 1)
        return _reporting(lambda stop: _mem_report(report, stop, after, frames), campaign_main, args)
    import cProfile
    import pstats

    threads: list[cProfile.Profile] = []
    plain_run = threading.Thread.run

    def profiled_run(self: threading.Thread) -> None:
        thread_prof = cProfile.Profile()
        threads.append(thread_prof)
        thread_prof.enable()
        try:
            plain_run(self)
        finally:
            thread_prof.disable()

    threading.Thread.run = profiled_run  # type: ignore[method-assign]
    prof = cProfile.Profile()
    try:
        return int(prof.runcall(campaign_main, args) or 0)
    finally:
        threading.Thread.run = plain_run  # type: ignore[method-assign]
        buf = io.StringIO()
        st = pstats.Stats(prof, stream=buf)
        for thread_prof in list(threads):
            thread_prof.disable()  # a thread still running (a daemon thread) is read as it is now
            st.add(thread_prof)
        st.dump_stats(str(out.with_suffix(".prof")))
        st.sort_stats("cumulative").print_stats(40)
        st.sort_stats("tottime").print_stats(40)
        out.with_suffix(".txt").write_text(buf.getvalue())


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
