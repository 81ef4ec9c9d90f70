"""`python -m campaign.bench.profiled OUT KIND ARGS...`: `campaign ARGS` under a profiler, for
`campaign bench scale` with CAMPAIGN_BENCH_PROFILE=cpu|mem (the bench starts its daemons this way).

KIND `cpu`: cProfile in every thread (the daemon's passes run on its scheduler's threads, not the main
one: each thread gets its own profiler, merged at the end); OUT.prof (pstats) and OUT.txt (the 40
functions with the most cumulative time and the 40 with the most own time). KIND `mem`: tracemalloc (10 frames); every 60 s and at exit OUT.txt gets
the 25 source lines holding the most memory now, so what grows is seen as it grows.
Written when the command returns (the daemon's normal end, or SIGTERM turned into SystemExit).
"""

from __future__ import annotations

import io
import signal
import sys
import threading
import time
from pathlib import Path


def _mem_report(out: Path, stop: threading.Event) -> None:
    import tracemalloc

    started = time.monotonic()
    with out.open("w") as fh:
        while True:
            last = stop.wait(60)
            snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
            stats = snap.statistics("lineno")
            total = sum(s.size for s in stats)
            fh.write(f"--- {time.monotonic() - started:.0f} s: {total / 2**20:.1f} MiB traced\n")
            for s in stats[:25]:
                fh.write(f"{s.size / 2**20:8.1f} MiB {s.count:>9} blocks  {s.traceback[0]}\n")
            fh.flush()
            if last:
                return


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
    if kind == "mem":
        import tracemalloc

        tracemalloc.start(10)
        stop = threading.Event()
        t = threading.Thread(target=_mem_report, args=(out.with_suffix(".txt"), stop), daemon=True)
        t.start()
        try:
            return campaign_main(args)
        finally:
            stop.set()
            t.join()
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
