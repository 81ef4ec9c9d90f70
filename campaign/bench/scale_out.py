"""`campaign bench scale --daemons N --db URL|postgres`: the propositions spread over several campaigns,
worked by N `campaign run` daemons on one shared PostgreSQL store, as several machines would run them.

Every process is its own, started the way a user starts it (docs/scale.md): one `campaign market serve`
(standalone, on a clock `--speed` times the wall's), one `campaign crowd run` (the simulated crowd of
every campaign, the same workers and truth the daemons' spec names), and N `campaign run --db URL`
daemons, each with its own `--state`, dividing the campaigns by leases. A virtual clock shared by
several processes is not built, so this run is on the scaled wall clock: its results can depend on the
machine's load (docs/virtual-time.md), which is why the per-campaign quality is reported, to compare
runs by it.

How the propositions are divided: into campaigns of at most CAMPAIGN_SIZE (11,750: a quarter of the
seed's 47,000), and at least MIN_CAMPAIGNS (4), the count not depending on N, so the same
`--propositions` and `--seed` give the same campaigns (same items, truth, workers) for any N and the
runs compare campaign by campaign. Campaign k gets the items `write_inputs` makes for seed
`seed * 1000 + k` (distinct texts, so the one crowd tells the campaigns' items apart).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from campaign.bench.measure import (
    ASSIGNMENTS,
    ITEMS_PER_HIT,
    _children,
    _rss_kib,
    dir_mib,
    market_auto_approved,
    percentile,
    step_figures,
)
from campaign.bench.quality import write_inputs
from campaign.child_process import end

CAMPAIGN_SIZE = 11_750


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return _rss_kib(pid)
MIN_CAMPAIGNS = 4
BALANCE = "10000000.00"


def partition(propositions: int, campaigns: int | None = None) -> list[int]:
    """How many propositions each campaign gets: `campaigns` of them (default: enough that none exceeds
    CAMPAIGN_SIZE, at least MIN_CAMPAIGNS, never more than there are HITs' worth of items), as equal as
    can be, the larger ones first. Independent of the number of daemons on purpose (see the module doc)."""
    if propositions < ITEMS_PER_HIT:
        raise ValueError(f"at least {ITEMS_PER_HIT} propositions")
    if campaigns is None:
        campaigns = max(MIN_CAMPAIGNS, math.ceil(propositions / CAMPAIGN_SIZE))
    campaigns = max(1, min(campaigns, propositions // ITEMS_PER_HIT))
    base, extra = divmod(propositions, campaigns)
    return [base + (1 if k < extra else 0) for k in range(campaigns)]


def campaign_names(sizes: list[int]) -> list[str]:
    return [f"scale{k:03d}" for k in range(len(sizes))]


def spec_text(entries: list[tuple[str, Path, Path, int]], endpoint: str, speed: float) -> str:
    """The daemons' and the crowd's spec: one Likert campaign per entry (name, propositions, truth, n) on
    the standalone marketplace. On the scaled clock the stage's clocks are simulated time: a lifetime
    and an auto-approval delay long enough (in wall seconds: 365 d and 30 d over `speed`) that neither
    a HIT nor an unreviewed answer lapses while the daemons are busy elsewhere."""
    out = ["campaigns:"]
    for name, props, truth, n in entries:
        hits = -(-n // ITEMS_PER_HIT)
        budget = hits * ASSIGNMENTS * 0.06 * 1.5 + 10
        out.append(f"""  - name: {name}
    topic: What matters in collection {name}?
    marketplace: local
    endpoint_url: {endpoint}
    input:
      propositions: {props}
    task:
      kind: likert
      items_per_hit: {ITEMS_PER_HIT}
      assignments: {ASSIGNMENTS}
      reward: "0.06"
      lifetime: 365d
      duration: 8h
      auto_approval_delay: 30d
    budget: "{budget:.2f}"
    schedule:
      poll_interval: 0.5
    crowd:
      kind: simulated
      speed: {speed}
      truth: {truth}""")
    return "\n".join(out) + "\n"


def _cpu_ticks(pid: int) -> int | None:
    """User + system CPU ticks of one process (/proc/PID/stat fields 14 and 15)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


class ProcessMemory:
    """Each watched process tree's peak resident memory (the process and its children added up),
    sampled from /proc every `every` seconds; `extra` runs at each sample too (the bench counts the
    PostgreSQL connections there)."""

    def __init__(self, every: float = 0.25, timeline: Path | None = None, timeline_every: float = 5.0) -> None:
        self.every = every
        # `timeline`: a line of every process's RSS (name=MiB) every `timeline_every` s, to see what grows when
        self.timeline, self.timeline_every, self._next_line, self._t0 = timeline, timeline_every, 0.0, time.monotonic()
        self.pids: dict[str, int] = {}
        self.peak_kib: dict[str, int] = {}
        self.total_peak_kib = 0
        self._cpu_ticks: dict[str, dict[int, int]] = {}  # per tree: each process's CPU ticks at its last sample
        self.extra: list[Any] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="process-memory", daemon=True)

    def watch(self, name: str, pid: int) -> None:
        self.pids[name] = pid
        self.peak_kib.setdefault(name, 0)
        self._cpu_ticks.setdefault(name, {})
        if not self._thread.is_alive():
            self._thread.start()

    @staticmethod
    def tree_kib(pid: int, proportional: bool = False) -> int:
        """RSS of the tree; `proportional`: PSS instead (shared pages split among their sharers), for
        PostgreSQL, whose every backend maps the same shared buffers and would count them once each."""
        seen, todo, total = set(), [pid], 0
        while todo:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            total += _pss_kib(p) if proportional else _rss_kib(p)
            todo.extend(_children(p))
        return total

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system) each watched tree used, as far as the samples saw it (a child that
        lived between two samples is missed)."""
        hz = os.sysconf("SC_CLK_TCK")
        return {name: round(sum(ticks.values()) / hz, 1) for name, ticks in self._cpu_ticks.items()}

    def _sample_cpu(self, name: str, pid: int) -> None:
        seen, todo = set(), [pid]
        ticks = self._cpu_ticks.setdefault(name, {})
        while todo:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            t = _cpu_ticks(p)
            if t is not None:
                ticks[p] = max(ticks.get(p, 0), t)
            todo.extend(_children(p))

    def sample(self) -> None:
        total = 0
        for name, pid in list(self.pids.items()):
            self._sample_cpu(name, pid)
            kib = self.tree_kib(pid, proportional=name == "postgres")
            self.peak_kib[name] = max(self.peak_kib[name], kib)
            total += kib
        self.total_peak_kib = max(self.total_peak_kib, total)
        now = time.monotonic() - self._t0
        if self.timeline is not None and now >= self._next_line:
            self._next_line = now + self.timeline_every
            with self.timeline.open("a") as fh:
                fh.write(f"{now:.0f}\t" + "\t".join(f"{n}={self.tree_kib(p, n == 'postgres') / 1024:.1f}"
                                                        for n, p in self.pids.items()) + "\n")
        for f in self.extra:
            try:
                f()
            except Exception:  # a figure on the side must not stop the memory sampling
                pass

    def _run(self) -> None:
        while not self._done.wait(self.every):
            self.sample()

    def stop(self) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()


@dataclass
class Daemon:
    name: str
    state: Path
    proc: subprocess.Popen[bytes]
    err: Any
    started: float
    seconds: float | None = None
    figures: dict[str, Any] = field(default_factory=dict)


def _env(market_state: Path | None) -> dict[str, str]:
    """The processes' environment: no AWS_* of the caller's (a daemon reaches the standalone marketplace
    with the credentials file it wrote, through boto3's standard chain)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    code = os.environ.get("CAMPAIGN_BENCH_CODE")  # another checkout's campaign (e.g. before a change) under this bench
    if code:
        env["PYTHONPATH"] = os.pathsep.join([code, *filter(None, [env.get("PYTHONPATH")])])
    if market_state is not None:
        env["AWS_SHARED_CREDENTIALS_FILE"] = str(market_state / "credentials")
    return env


def _campaign_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "campaign", *args]


def _profiled_cmd(role: str, name: str, logs: Path, *args: str) -> list[str]:
    """`campaign ARGS`, under the profiler CAMPAIGN_BENCH_PROFILE (cpu | mem, see campaign.bench.profiled)
    names when CAMPAIGN_BENCH_PROFILE_ROLES (comma-separated, default `daemon`; also `market`, `crowd`)
    lists the process's role; its report is logs/NAME-KIND.txt."""
    profile = os.environ.get("CAMPAIGN_BENCH_PROFILE")
    roles = {r.strip() for r in os.environ.get("CAMPAIGN_BENCH_PROFILE_ROLES", "daemon").split(",")}
    if profile in ("cpu", "mem", "malloc") and role in roles:
        return [sys.executable, "-m", "campaign.bench.profiled", str(logs / f"{name}-{profile}"), profile, *args]
    return _campaign_cmd(*args)


@contextmanager
def _database(db: str) -> Iterator[tuple[str, Any]]:
    """(SQLAlchemy URL, PgServer or None): `postgres` starts a throw-away server with pg_stat_statements."""
    if db != "postgres":
        yield db, None
        return
    from campaign.bench.pgserver import pg_server

    with pg_server(preload=True) as server:
        yield server.create_database(), server


def _psycopg_dsn(url: str) -> str:
    """A SQLAlchemy URL (postgresql+psycopg://...) as libpq takes it."""
    return "postgresql://" + url.split("://", 1)[1]


def store_figures(url: str, names: list[str]) -> dict[str, Any]:
    """What the shared store holds after the run: HITs, answers, posted slots, auto-approvals, each
    campaign's status and who took it when (lease events: the first taker, then every change of hands)."""
    import psycopg

    with psycopg.connect(_psycopg_dsn(url), autocommit=True) as conn:
        def one(sql: str) -> int:
            row = conn.execute(sql).fetchone()
            return int(row[0]) if row and row[0] is not None else 0

        statuses: dict[str, str] = {str(a): str(b) for a, b in conn.execute("SELECT name, status FROM campaigns").fetchall()}
        leases = conn.execute("SELECT campaign, message, ts FROM events WHERE kind = 'lease' ORDER BY id").fetchall()
        takeovers: list[float] = []  # when each change of hands was, in seconds after the first lease taken
        first = float(leases[0][2]) if leases else 0.0
        last: dict[str, str] = {}
        for camp, message, ts in leases:
            holder = message.rsplit(" ", 1)[-1]
            if camp in last and last[camp] != holder:
                takeovers.append(round(float(ts) - first, 1))
            last[camp] = holder
        return {"hits": one("SELECT COUNT(*) FROM hits WHERE status != 'draft'"),
                "assignments": one("SELECT COUNT(*) FROM assignments"),
                "slots": one("SELECT COALESCE(SUM(assignments), 0) FROM hits WHERE status != 'draft'"),
                "auto_approved_before_review": one("SELECT COUNT(*) FROM events WHERE kind = 'auto_approved'"),
                "statuses": {n: statuses.get(n) for n in names},
                "lease_events": len(leases), "lease_takeovers": len(takeovers), "lease_takeover_seconds": takeovers}


def postgres_figures(url: str, connections_peak: int, stat_statements: bool, top: int = 5) -> dict[str, Any]:
    """The server's own figures: the database's size, the connections (now and the peak the sampler saw),
    and where it had pg_stat_statements, the statements that took the most time in all."""
    import psycopg

    with psycopg.connect(_psycopg_dsn(url), autocommit=True) as conn:
        size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        out: dict[str, Any] = {"database_mib": round(int(size[0] if size else 0) / 2**20, 1),
                               "connections_peak": connections_peak, "slowest_statements": None}
        if stat_statements:
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                rows = conn.execute(
                    "SELECT calls, total_exec_time, mean_exec_time, rows, query FROM pg_stat_statements "
                    "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                    "AND query NOT LIKE '%%pg_stat%%' "  # the bench's own look-ups
                    "ORDER BY total_exec_time DESC LIMIT %s", (top,)).fetchall()
                out["slowest_statements"] = [
                    {"calls": int(c), "total_s": round(float(t) / 1000, 2), "mean_ms": round(float(m), 3), "rows": int(r),
                     "query": " ".join(str(q).split())[:300]} for c, t, m, r, q in rows]
            except psycopg.Error as exc:
                out["slowest_statements"] = f"unavailable: {exc}".strip()
        return out


def _connections(url: str) -> int:
    import psycopg

    with psycopg.connect(_psycopg_dsn(url), autocommit=True, connect_timeout=5) as conn:
        row = conn.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()").fetchone()
        return int(row[0]) - 1 if row else 0  # not this one


def quality(states: list[Path], entries: list[tuple[str, Path, Path, int]]) -> dict[str, float | None]:
    """Each campaign's Pearson correlation of its exported scores with the simulated truth, from the
    scores.jsonl of whichever daemon finished it (None: no daemon wrote it)."""
    import numpy as np

    from campaign.inputs import load_truth

    out: dict[str, float | None] = {}
    for name, _, truth_file, _ in entries:
        found = [s / name / "scores.jsonl" for s in states if (s / name / "scores.jsonl").is_file()]
        if not found:
            out[name] = None
            continue
        latest = max(found, key=lambda f: f.stat().st_mtime)
        rows = [json.loads(line) for line in latest.read_text(encoding="utf-8").splitlines() if line.strip()]
        truth = load_truth(truth_file)
        pairs = [(float(r["score"]), truth[r["item"]]) for r in rows if r.get("item") in truth and r.get("score") is not None]
        xs, ys = np.array([a for a, _ in pairs]), np.array([b for _, b in pairs])
        out[name] = round(float(np.corrcoef(xs, ys)[0, 1]), 4) if len(pairs) > 2 else None
    return out


def run_scale_out(n: int, daemons: int, db: str, seed: int = 0, keep: Path | None = None, timeout: float = 4 * 3600.0,
                  speed: float = 600.0, campaigns: int | None = None, lease_ttl: float = 15.0,
                  stagger: float = 0.0, crowd_threads: int | None = None, daemon_nice: int = 0) -> dict[str, Any]:
    """Run the bench; returns the single-daemon bench's keys (figures of the whole run) and more:
    `per_daemon`, `processes` (peak RSS MiB of each), `quality`, `postgres`, lease figures.
    `daemon_nice`: the daemons' niceness, set as each starts (while it imports, before any thread of its
    own, which would otherwise keep the old priority)."""
    sizes = partition(n, campaigns)
    names = campaign_names(sizes)
    with tempfile.TemporaryDirectory(prefix="campaign-scale-out-") as tmp, _database(db) as (url, server):
        folder = (keep or Path(tmp)).resolve()  # the spec names its inputs by this path: relative, they doubled
        folder.mkdir(parents=True, exist_ok=True)
        entries = []
        for k, (name, size) in enumerate(zip(names, sizes, strict=True)):
            sub = folder / "inputs" / name
            sub.mkdir(parents=True, exist_ok=True)
            props, truth = write_inputs(sub, size, seed * 1000 + k)
            entries.append((name, props, truth, size))
        market_state = folder / "market"
        logs = folder / "logs"
        logs.mkdir(exist_ok=True)
        # every second: at 0.25 s the sampler (PSS of every PostgreSQL backend from smaps_rollup) took 11% of
        # a core at 470,000, CPU the measured processes then lacked
        memory = ProcessMemory(every=1.0, timeline=logs / "rss.tsv")
        connections_peak = [0]

        def count_connections() -> None:
            connections_peak[0] = max(connections_peak[0], _connections(url))

        market = crowd = None
        running: list[Daemon] = []
        pg_pid = server.postmaster_pid() if server is not None else None
        if pg_pid:
            memory.watch("postgres", pg_pid)
        started = time.monotonic()
        load_at_start = [round(x, 2) for x in os.getloadavg()]
        try:
            with (logs / "market.log").open("wb") as market_log:
                market = subprocess.Popen(_profiled_cmd("market", "market", logs, "market", "serve", "--port", "0", "--state", str(market_state),
                                                        "--mode", "prod", "--balance", BALANCE, "--speed", str(speed)),
                                          stdout=subprocess.PIPE, stderr=market_log, env=_env(None))
            memory.watch("market", market.pid)
            assert market.stdout is not None
            endpoint = market.stdout.readline().decode().strip()
            if not endpoint.startswith("http"):
                raise RuntimeError(f"campaign market serve did not start: {(logs / 'market.log').read_text()[-2000:]}")
            spec = folder / "scale.yaml"
            spec.write_text(spec_text(entries, endpoint, speed), encoding="utf-8")
            with (logs / "crowd.log").open("wb") as crowd_log:
                crowd = subprocess.Popen(_profiled_cmd("crowd", "crowd", logs, "crowd", "run", "--config", str(spec), "--endpoint", endpoint,
                                                       "--seed", str(seed), "--market-state", str(market_state),
                                                       "--speed", str(speed),
                                                       *(("--threads", str(crowd_threads)) if crowd_threads else ())),
                                         stdout=crowd_log, stderr=subprocess.STDOUT, env=_env(None))
            memory.watch("crowd", crowd.pid)
            memory.extra.append(count_connections)
            for i in range(daemons):
                if i and stagger:
                    time.sleep(stagger)
                name = f"daemon{i + 1}"
                state = folder / name
                err = (logs / f"{name}.log").open("wb")
                args = ("run", "--config", str(spec), "--state", str(state), "--db", url, "--seed", str(seed), "--quiet",
                        "--lease-ttl", str(lease_ttl))
                proc = subprocess.Popen(_profiled_cmd("daemon", name, logs, *args),
                                        stdout=subprocess.DEVNULL, stderr=err, env=_env(market_state))
                if daemon_nice:
                    os.setpriority(os.PRIO_PROCESS, proc.pid, daemon_nice)
                running.append(Daemon(name, state, proc, err, time.monotonic()))
                memory.watch(name, proc.pid)
            deadline = started + timeout
            while any(d.seconds is None for d in running):
                for d in running:
                    if d.seconds is None and d.proc.poll() is not None:
                        d.seconds = round(time.monotonic() - d.started, 1)
                        if d.proc.returncode != 0:
                            d.err.flush()
                            said = (logs / f"{d.name}.log").read_text(errors="replace")[-2000:]
                            raise RuntimeError(f"{d.name} (campaign run) exited {d.proc.returncode}: {said}")
                if crowd.poll() is not None:
                    raise RuntimeError(f"campaign crowd run exited {crowd.returncode}: "
                                       f"{(logs / 'crowd.log').read_text(errors='replace')[-2000:]}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the daemons did not finish within {timeout:.0f} s")
                time.sleep(0.2)
            seconds = round(time.monotonic() - started, 1)
            memory.sample()
        finally:
            memory.stop()
            for d in running:
                if d.proc.poll() is None:
                    d.proc.kill()
                    d.proc.wait()
                d.err.close()
            for child in (crowd, market):  # stopped, their stdout closed
                if child is not None:
                    end(child, grace=60)
        figures = store_figures(url, names)
        pg = postgres_figures(url, connections_peak[0], bool(server and server.stat_statements))
        per_daemon = []
        all_ticks: list[float] = []
        merged_steps: dict[str, dict[str, list[float]]] = {}
        requests = 0
        for d in running:
            stats_file = d.state / "run-stats.json"
            stats = json.loads(stats_file.read_text()) if stats_file.is_file() else {}
            ticks = [float(t) for per in (stats.get("tick_ms") or {}).values() for t in per]
            all_ticks += ticks
            for camp, steps in (stats.get("step_ms") or {}).items():
                merged_steps[f"{d.name}/{camp}"] = steps
            requests += int(stats.get("requests") or 0)
            per_daemon.append({"name": d.name, "seconds": d.seconds, "peak_rss_mib": round(memory.peak_kib[d.name] / 1024, 1),
                               "requests": stats.get("requests"), "requests_by_op": stats.get("requests_by_op"),
                               "campaigns_ticked": sorted(stats.get("tick_ms") or {}),
                               "ticks": len(ticks), "tick_ms": {"p50": percentile(ticks, 50), "p99": percentile(ticks, 99)},
                               "state_mib": round(dir_mib(d.state), 1)})
        processes = {k: round(v / 1024, 1) for k, v in memory.peak_kib.items()}
        return {
            # the single-daemon bench's keys, for the whole run
            "propositions": n,
            "hits": figures["hits"],
            "assignments": figures["assignments"],
            "unfilled_slots": max(0, figures["slots"] - figures["assignments"]),
            "seconds": seconds,
            "peak_rss_mib": round(memory.total_peak_kib / 1024, 1),
            "requests": requests,
            "store_mib": pg["database_mib"],
            "market_mib": round(dir_mib(market_state), 1),
            "tick_ms": {"p50": percentile(all_ticks, 50), "p99": percentile(all_ticks, 99)},
            "step_ms": step_figures(merged_steps),
            "auto_approved_before_review": max(figures["auto_approved_before_review"],
                                               market_auto_approved(market_state / "market.db")),
            # and what only several daemons have
            "daemons": daemons,
            "db": "postgres (throw-away server)" if server is not None else "given URL",
            "speed": speed,
            "crowd_threads": crowd_threads,
            "daemon_nice": daemon_nice,
            "campaigns": dict(zip(names, sizes, strict=True)),
            "campaigns_finished": sum(1 for s in figures["statuses"].values() if s == "finished"),
            "statuses": figures["statuses"],
            "per_daemon": per_daemon,
            "processes_peak_rss_mib": processes,
            "processes_cpu_s": memory.cpu_seconds(),
            "load_average": {"start": load_at_start, "end": [round(x, 2) for x in os.getloadavg()]},
            "lease_events": figures["lease_events"],
            "lease_takeovers": figures["lease_takeovers"],
            # a campaign taken over rebuilds what its daemon keeps for it from the store: when they happen
            # tells whether they set a daemon's peak (the end of run r, docs/scale.md)
            "lease_takeover_seconds": figures["lease_takeover_seconds"],
            "quality": quality([d.state for d in running], entries),
            "postgres": pg,
        }
