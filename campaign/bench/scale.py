"""`campaign bench scale [--propositions N] [--json]`: a Likert campaign of N propositions (5 per HIT,
5 assignments, the default simulated crowd with its spammers) run through `campaign run` exactly as a
user runs it, in a child process, with nothing but `--config`, `--state` and `--quiet`.

It prints what decides whether a lab can run the seed's own scale (seed 000: about 47,000 propositions,
9,400 HITs, 47,000 assignments) on one machine: wall seconds, the peak resident memory of the run's processes together (daemon, marketplace, crowd), requests made to
the marketplace, the sizes of the store and of the marketplace's database, the daemon's tick time
(p50/p99, from the run statistics the daemon leaves in `<state>/run-stats.json`, and each step's
share of it), and how many
assignments the marketplace approved by itself before the daemon decided on them (work that was paid
without being reviewed: `auto_approved` events in the store, checked against the marketplace's own
record of the approvals it made by itself).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from campaign import argtypes
from campaign.bench.measure import (  # shared with the scale-out bench
    ASSIGNMENTS,
    ITEMS_PER_HIT,
    _children,
    _rss_kib,
    dir_mib,
    market_auto_approved,
    percentile,
    step_figures,
)
from campaign.bench.quality import write_inputs  # N propositions with a hidden truth, the same generator
from campaign.jsonout import dumps

# The scale-out bench's daemons run at this niceness: the marketplace (and the simulated crowd standing
# in for people) take the CPU first, and a daemon's passes, which a scheduler repeats as often as CPU
# allows, take what is left (docs/scale.md, "Who goes first on one machine").
DAEMON_NICE = 10


def spec_text(props: Path, truth: Path, n: int) -> str:
    hits = -(-n // ITEMS_PER_HIT)
    budget = hits * ASSIGNMENTS * 0.06 * 1.5 + 10  # reward + MTurk's fee with room to spare
    return f"""campaigns:
  - name: scale
    topic: What matters in this collection?
    input:
      propositions: {props}
    task:
      kind: likert
      items_per_hit: {ITEMS_PER_HIT}
      assignments: {ASSIGNMENTS}
      reward: "0.06"
    budget: "{budget:.2f}"
    crowd:
      kind: simulated
      truth: {truth}
"""


def store_figures(db: Path) -> dict[str, int]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        def one(sql: str) -> int:
            return int(con.execute(sql).fetchone()[0])

        return {"hits": one("SELECT COUNT(*) FROM hits WHERE status != 'draft'"),
                "assignments": one("SELECT COUNT(*) FROM assignments"),
                "slots": one("SELECT COALESCE(SUM(assignments), 0) FROM hits WHERE status != 'draft'"),
                "auto_approved_before_review": one("SELECT COUNT(*) FROM events WHERE kind = 'auto_approved'")}
    finally:
        con.close()


class TreeMemory:
    """The peak of a process tree's resident memory added up (the daemon and the processes it starts:
    its marketplace and its crowd), sampled every 0.2 s from /proc (Linux; elsewhere 0, and the
    largest single process's peak stands in). Shared pages are counted once per process, so this is
    an upper bound of what the run holds."""

    def __init__(self, pid: int, every: float = 0.2) -> None:
        self.pid, self.every, self.peak_kib = pid, every, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-memory", daemon=True)
        self._thread.start()

    def sample(self) -> int:
        seen, todo, total = set(), [self.pid], 0
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            total += _rss_kib(pid)
            todo.extend(_children(pid))
        return total

    def _run(self) -> None:
        while not self._done.wait(self.every):
            self.peak_kib = max(self.peak_kib, self.sample())

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def prepare(folder: Path, n: int, seed: int) -> Path:
    """The generated inputs and spec in `folder`; the spec's path. The spec names its inputs by their
    absolute paths (a relative `--keep sc` wrote `sc/props.tsv`, read as sc/sc/props.tsv)."""
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    props, truth = write_inputs(folder, n, seed)
    spec = folder / "scale.yaml"
    spec.write_text(spec_text(props, truth, n), encoding="utf-8")
    return spec


def run_scale(n: int, seed: int = 0, keep: Path | None = None, timeout: float = 3600.0) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="campaign-scale-") as tmp:
        spec = prepare(keep or Path(tmp), n, seed)
        state = spec.parent / "state"
        cmd = [sys.executable, "-m", "campaign", "run", "--config", str(spec), "--state", str(state),
               "--seed", str(seed), "--quiet"]
        started = time.monotonic()
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=dict(os.environ))
            sampler = TreeMemory(proc.pid)
            try:
                proc.wait(timeout=timeout)
            finally:
                sampler.stop()
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            seconds = time.monotonic() - started
            if proc.returncode != 0:
                err.seek(0)
                raise RuntimeError(f"campaign run exited {proc.returncode}: {err.read().decode('utf-8', 'replace')[-2000:]}")
        # the run's processes together (daemon, marketplace, crowd); the largest one alone as a floor,
        # in case a peak fell between two samples
        peak_kib = max(sampler.peak_kib, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        stats_file = state / "run-stats.json"
        stats = json.loads(stats_file.read_text()) if stats_file.is_file() else {}
        ticks = [float(t) for per in (stats.get("tick_ms") or {}).values() for t in per]
        figures = store_figures(state / "campaign.db")
        return {
            "propositions": n,
            "hits": figures["hits"],
            "assignments": figures["assignments"],
            # slots of posted HITs that got no answer (expired first): the crowd fell behind the posting
            "unfilled_slots": max(0, figures["slots"] - figures["assignments"]),
            "seconds": round(seconds, 1),
            "peak_rss_mib": round(peak_kib / 1024, 1),
            "requests": stats.get("requests"),
            "store_mib": round(dir_mib(state) - dir_mib(state / "market") - dir_mib(state / "scale"), 1),
            "market_mib": round(dir_mib(state / "market"), 1),
            "tick_ms": {"p50": percentile(ticks, 50), "p99": percentile(ticks, 99)},
            # where a pass's time goes: each step's p50/p99 and its total over the run (s), slowest first
            "step_ms": step_figures(stats.get("step_ms") or {}),
            "auto_approved_before_review": max(figures["auto_approved_before_review"],
                                               market_auto_approved(state / "market" / "market.db")),
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="campaign bench scale", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--propositions", type=int, default=4000, help="propositions in the generated campaign")
    ap.add_argument("--seed", type=argtypes.seed, default=0, help="seed for the data and the run")
    ap.add_argument("--keep", type=Path, default=None, help="keep inputs and state in this folder")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--daemons", type=int, default=None,
                    help="run N `campaign run` daemons on one shared PostgreSQL store (needs --db), with a standalone "
                         "marketplace and crowd; the propositions are spread over several campaigns (docs/scale.md)")
    ap.add_argument("--db", default=None, metavar="URL|postgres",
                    help="the shared store: a SQLAlchemy PostgreSQL URL, or `postgres` to start a throw-away server")
    ap.add_argument("--campaigns", type=int, default=None,
                    help="with --db: how many campaigns to spread the propositions over (default: campaigns of at "
                         "most 11,750, at least 4)")
    ap.add_argument("--speed", type=float, default=600.0,
                    help="with --db: the marketplace's and crowd's clock speed-up (the run is on a scaled wall clock)")
    ap.add_argument("--crowd-threads", type=int, default=None, metavar="N",
                    help="with --db: `campaign crowd run --threads N` (default: the crowd's own default)")
    ap.add_argument("--daemon-nice", type=int, default=DAEMON_NICE, metavar="N",
                    help="with --db: the daemons' niceness (0-19). On one machine the marketplace serving people "
                         "goes first and the daemons' passes take the CPU left (docs/scale.md); 0: all alike")
    args = ap.parse_args(argv)
    if args.propositions < ITEMS_PER_HIT:
        ap.error(f"--propositions must be at least {ITEMS_PER_HIT}")
    if args.daemons is not None and args.daemons < 1:
        ap.error("--daemons must be at least 1")
    if args.db is None and (args.daemons or 1) > 1:
        ap.error("several daemons share a PostgreSQL store: give --db URL or --db postgres")
    if args.db is not None and args.db != "postgres" and not args.db.startswith("postgresql"):
        ap.error("--db must be a PostgreSQL URL (postgresql+psycopg://...) or `postgres`")
    if args.db is None and (args.campaigns is not None):
        ap.error("--campaigns goes with --db")
    if args.campaigns is not None and args.campaigns < 1:
        ap.error("--campaigns must be at least 1")
    if args.crowd_threads is not None and (args.db is None or args.crowd_threads < 1):
        ap.error("--crowd-threads goes with --db and is at least 1")
    if not 0 <= args.daemon_nice <= 19:
        ap.error("--daemon-nice is a niceness from 0 to 19")
    if args.db is not None:
        from campaign.bench.scale_out import run_scale_out

        out = run_scale_out(args.propositions, args.daemons or 1, args.db, seed=args.seed, keep=args.keep,
                            speed=args.speed, campaigns=args.campaigns, crowd_threads=args.crowd_threads,
                            daemon_nice=args.daemon_nice)
    else:
        out = run_scale(args.propositions, args.seed, args.keep)
    if args.json:
        print(dumps(out, indent=2))
        return 0
    tick = out["tick_ms"]
    print(f"{out['propositions']:,} propositions, {out['hits']:,} HITs, {out['assignments']:,} assignments")
    print(f"  wall {out['seconds']:.1f} s, peak RSS {out['peak_rss_mib']:.1f} MiB, requests {out['requests']}")
    print(f"  store {out['store_mib']:.1f} MiB, marketplace {out['market_mib']:.1f} MiB")
    print(f"  tick p50 {tick['p50']} ms, p99 {tick['p99']} ms")
    for step, fig in list(out.get("step_ms", {}).items())[:5]:
        print(f"    {step:<10} p50 {fig['p50']} ms, p99 {fig['p99']} ms, {fig['total_s']} s in all")
    print(f"  approved by the marketplace before review: {out['auto_approved_before_review']}")
    if "per_daemon" in out:
        print_scale_out(out)
    if out["unfilled_slots"]:
        print(f"  warning: {out['unfilled_slots']:,} assignment slots expired unanswered (the crowd fell behind): "
              "this run did less than the campaign asked for")
    return 0


def print_scale_out(out: dict[str, Any]) -> None:
    """The text report's part that only several daemons have: each daemon, each process, each campaign."""
    print(f"  {out['daemons']} daemon(s), {len(out['campaigns'])} campaigns, {out['campaigns_finished']} finished; "
          f"lease events {out['lease_events']}, changes of hands {out['lease_takeovers']}")
    for d in out["per_daemon"]:
        print(f"    {d['name']}: {d['seconds']} s, peak RSS {d['peak_rss_mib']} MiB, requests {d['requests']}, "
              f"{d['ticks']} ticks (p50 {d['tick_ms']['p50']} ms, p99 {d['tick_ms']['p99']} ms)")
    print("  peak RSS per process (MiB): " + ", ".join(f"{k} {v}" for k, v in out["processes_peak_rss_mib"].items()))
    print("  quality (Pearson vs truth): " + ", ".join(f"{k} {v}" for k, v in out["quality"].items()))
    pg = out["postgres"]
    print(f"  PostgreSQL: database {pg['database_mib']} MiB, connections peak {pg['connections_peak']}")
    if isinstance(pg.get("slowest_statements"), list):
        for st in pg["slowest_statements"]:
            print(f"    {st['total_s']:>8} s {st['calls']:>8} calls {st['mean_ms']:>8} ms  {st['query'][:110]}")
