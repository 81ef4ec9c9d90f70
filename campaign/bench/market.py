"""`campaign bench market`: throughput, latency and memory of the built-in marketplace under a campaign's
load: post HITs through boto3, let workers accept and submit through the worker API, collect through
paginated ListAssignmentsForHIT and approve everything; then a crowd's view of a big marketplace: post
10,000 more HITs and let 200 workers list the HITs open to them and accept one, over and over.

The server runs as a subprocess (`campaign market serve`, as users run it) so its CPU and peak memory
(VmHWM) are its own, and it is driven from several client processes (`--processes`, each with
`--threads` threads and its own boto3 client), as many requesters and workers would drive it: a boto3
call costs its client more CPU than the server spends on it, and one client process (one GIL) would
measure the client. Every request goes over HTTP with a real SigV4 signature or a worker's session.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from botocore import xform_name  # type: ignore[import-untyped]

from campaign.bench.market_client import SignedClient
from campaign.bench.slowloris import Trickle, probe
from campaign.credentials import read_credentials_file
from campaign.jsonout import dumps
from campaign.market.operator import offline
from campaign.market.worker_client import WorkerAPIError, WorkerClient
from campaign.marketplaces.mturk_client import make_client

CLIENTS = ("boto3", "sigv4")
QUESTION = ('<HTMLQuestion xmlns="http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2011-11-11/HTMLQuestion.xsd">'
            '<HTMLContent><![CDATA[<!DOCTYPE html><html><body><form method="post" action="https://www.mturk.com/mturk/externalSubmit">'
            '<input type="hidden" name="assignmentId" value=""><p>Statement {i}</p><input name="score"></form></body></html>]]>'
            '</HTMLContent><FrameHeight>0</FrameHeight></HTMLQuestion>')


SERVERS = {
    "new": ["-m", "campaign", "market", "serve"],  # uvicorn (campaign.web.server), as users run it
    "legacy": ["-m", "campaign.bench.legacy_market"],  # the standard library's ThreadingHTTPServer it replaced
}


def _start_server(state: Path, server: str = "new", max_files: int | None = None) -> tuple[subprocess.Popen, str]:
    def limit() -> None:
        if max_files:
            resource.setrlimit(resource.RLIMIT_NOFILE, (max_files, max_files))

    proc = subprocess.Popen([sys.executable, *SERVERS[server], "--port", "0", "--state", str(state)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, preexec_fn=limit)
    line = proc.stdout.readline().strip() if proc.stdout else ""
    if not line.startswith("http://"):
        proc.kill()
        raise RuntimeError(f"marketplace did not start: {line!r}")
    return proc, line


def _peak_rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU of a process so far (Linux), to tell the server's cost from the client's."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class Requester(Protocol):
    def call(self, op: str, **params: Any) -> dict[str, Any]: ...
    def pages(self, op: str, **params: Any) -> Iterator[dict[str, Any]]: ...


class Boto3Requester:
    """boto3, as the daemon calls MTurk (`campaign.marketplaces.mturk_client.make_client`); operations by their API names."""

    def __init__(self, url: str, credentials_file: Path) -> None:
        self.client = make_client("local", url, credentials_file=credentials_file, max_rps=0, max_attempts=3)
        self._paginators: dict[str, Any] = {}

    def call(self, op: str, **params: Any) -> dict[str, Any]:
        return self.client.call(xform_name(op), **params)

    def pages(self, op: str, **params: Any) -> Iterator[dict[str, Any]]:
        paginator = self._paginators.get(op)
        if paginator is None:  # built once, as a client would
            paginator = self._paginators[op] = self.client.raw.get_paginator(xform_name(op))
        yield from paginator.paginate(**params, PaginationConfig={"PageSize": 100})


class SignedRequester:
    """The light SigV4 client of `market_client` (--client sigv4)."""

    def __init__(self, url: str, credentials_file: Path) -> None:
        self.client = SignedClient(url, read_credentials_file(credentials_file, "default"))

    def call(self, op: str, **params: Any) -> dict[str, Any]:
        return self.client.call(op, **params)

    def pages(self, op: str, **params: Any) -> Iterator[dict[str, Any]]:
        return self.client.pages(op, **params)


class _Clients:
    """Requesters' and workers' machines: `processes` client processes of `threads` threads each.

    A boto3 call costs the client more CPU than the marketplace spends answering it (about 1.3-2 ms
    against well under 1 ms), so one Python process with one GIL cannot load the server; several
    processes, as many requesters and workers would be, can. Each process has its own boto3 client and
    its own keep-alive connections; the bench's workers are signed in once and their session cookies
    handed to every process (one person, several tabs).
    """

    def __init__(self, processes: int, threads: int, url: str, credentials_file: Path,
                 sessions: dict[str, tuple[str, str]], client_kind: str = "boto3") -> None:
        ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no inherited sockets or SQLite handles
        self.threads = threads
        self._pipes: list[Any] = []
        self._procs: list[Any] = []
        for _ in range(max(1, processes)):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_client_main, args=(child, url, str(credentials_file), sessions, threads, client_kind),
                               daemon=True)
            proc.start()
            child.close()
            self._pipes.append(parent)
            self._procs.append(proc)
        for pipe in self._pipes:
            self._receive(pipe)  # ready: imports done, clients built

    @property
    def processes(self) -> int:
        return len(self._procs)

    @staticmethod
    def _receive(pipe: Any) -> Any:
        kind, value = pipe.recv()
        if kind == "error":
            raise RuntimeError(f"bench client process failed:\n{value}")
        return value

    def run(self, name: str, chunks: list[list[Any]], context: dict[str, Any]) -> tuple[float, list[dict[str, Any]]]:
        """Each process gets its chunk at once; wall time from the first send to the last answer."""
        t0 = time.perf_counter()
        for pipe, chunk in zip(self._pipes, chunks, strict=True):
            pipe.send((name, chunk, context))
        results = [self._receive(pipe) for pipe in self._pipes]
        return time.perf_counter() - t0, results

    def close(self) -> None:
        for pipe in self._pipes:
            try:
                pipe.send(None)
            except OSError:
                pass
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()


def _client_main(pipe: Any, url: str, credentials_file: str, sessions: dict[str, tuple[str, str]], threads: int,
                 client_kind: str) -> None:
    """A client process: waits for (phase, jobs, context), runs the jobs on its threads, sends back each
    job's latency per request, the requests made, its CPU time and what the jobs returned."""
    try:
        client: Requester = (Boto3Requester(url, Path(credentials_file)) if client_kind == "boto3"
                             else SignedRequester(url, Path(credentials_file)))
        workers = WorkerClient(url)
        workers.adopt_sessions(sessions)
        busy: dict[str, threading.Lock] = {w: threading.Lock() for w in sessions}  # a worker's own calls never overlap
        client.call("GetAccountBalance")  # warm: the client's first call loads what later calls reuse
        pipe.send(("ready", None))
    except BaseException:  # noqa: BLE001 - the parent shows it
        pipe.send(("error", traceback.format_exc()))
        return

    def post(job: int, ctx: dict[str, Any]) -> tuple[int, Any]:
        h = client.call("CreateHITWithHITType", HITTypeId=ctx["type_id"], MaxAssignments=ctx["per_hit"],
                        LifetimeInSeconds=86400, Question=QUESTION.format(i=job), UniqueRequestToken=f"{ctx['token']}-{job}")
        return 1, h["HIT"]["HITId"]

    def work(job: tuple[str, str], ctx: dict[str, Any]) -> tuple[int, Any]:
        hit_id, w = job
        aid = workers.accept(w, hit_id)["AssignmentId"]
        workers.submit(aid, [("score", "3")])
        return 2, None

    def collect(hit_id: str, ctx: dict[str, Any]) -> tuple[int, Any]:
        pages, ids = 0, []
        for page in client.pages("ListAssignmentsForHIT", HITId=hit_id):
            pages += 1  # MTurk's way: a page with a token, then an empty one
            ids += [a["AssignmentId"] for a in page["Assignments"]]
        return pages, ids

    def approve(aid: str, ctx: dict[str, Any]) -> tuple[int, Any]:
        client.call("ApproveAssignment", AssignmentId=aid)
        return 1, None

    def list_and_accept(job: tuple[str, float], ctx: dict[str, Any]) -> tuple[int, Any]:
        w, pick = job
        with busy[w]:
            listed = workers.available(w, 100)
            if not listed:
                return 1, None
            try:
                workers.accept(w, listed[int(pick * len(listed))]["HITId"])
            except WorkerAPIError as exc:  # another worker took the last slot in between: a real outcome, still a request
                if exc.code != "NoAvailableSlot":
                    raise
            return 2, None

    fns: dict[str, Callable[[Any, dict[str, Any]], tuple[int, Any]]] = {
        "post": post, "post-open": post, "work": work, "collect": collect, "approve": approve, "workers": list_and_accept}
    with ThreadPoolExecutor(max_workers=threads) as pool:
        while True:
            msg = pipe.recv()
            if msg is None:
                return
            name, jobs, ctx = msg
            fn = fns[name]
            lat: list[float] = []

            def timed(job: Any, fn: Callable[[Any, dict[str, Any]], tuple[int, Any]] = fn, ctx: dict[str, Any] = ctx,
                      lat: list[float] = lat) -> tuple[int, Any]:
                t = time.perf_counter()
                n, out = fn(job, ctx)
                lat.append((time.perf_counter() - t) / max(1, n))
                return n, out

            try:
                cpu0 = time.process_time()
                done = list(pool.map(timed, jobs))
                pipe.send(("done", {"lat": lat, "requests": sum(n for n, _ in done), "cpu": time.process_time() - cpu0,
                                    "out": [out for _, out in done]}))
            except BaseException:  # noqa: BLE001
                pipe.send(("error", traceback.format_exc()))


def _split(jobs: Sequence[Any], parts: int, key: Callable[[Any], str] | None = None) -> list[list[Any]]:
    """Round robin over the processes; with `key`, all of one worker's jobs go to one process (one browser)."""
    chunks: list[list[Any]] = [[] for _ in range(parts)]
    if key is None:
        for i, job in enumerate(jobs):
            chunks[i % parts].append(job)
        return chunks
    home: dict[str, int] = {}
    for job in jobs:
        chunks[home.setdefault(key(job), len(home) % parts)].append(job)
    return chunks


def _phase(clients: _Clients, name: str, jobs: Sequence[Any], server_pid: int | None = None,
           context: dict[str, Any] | None = None, key: Callable[[Any], str] | None = None) -> tuple[dict[str, Any], list[Any]]:
    """Run one phase's jobs on every client process; each job returns how many requests it made.

    Latency is per request of a job (a job's time over its requests). Besides throughput and latency,
    the CPU milliseconds per request spent by the server process and by the client processes together.
    Also returns what the jobs returned, in no particular order.
    """
    server_cpu0 = _cpu_seconds(server_pid) if server_pid else None
    wall, results = clients.run(name, _split(jobs, clients.processes, key), context or {})
    server_cpu1 = _cpu_seconds(server_pid) if server_pid else None
    lat = sorted(x for r in results for x in r["lat"])
    requests = sum(r["requests"] for r in results)
    client_cpu = sum(r["cpu"] for r in results)
    q = (lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000) if lat else (lambda p: 0.0)
    per_req = max(1, requests)
    stats = {"phase": name, "requests": requests, "seconds": round(wall, 3), "rps": round(requests / wall, 1) if wall else 0.0,
             "p50_ms": round(q(0.50), 2), "p99_ms": round(q(0.99), 2),
             "server_cpu_ms_per_req": (round((server_cpu1 - server_cpu0) * 1000 / per_req, 3)
                                       if server_cpu0 is not None and server_cpu1 is not None else None),
             "client_cpu_ms_per_req": round(client_cpu * 1000 / per_req, 3)}
    return stats, [out for r in results for out in r["out"]]


def run(hits: int, per_hit: int, threads: int = 4, open_hits: int = 10_000, crowd: int = 200,
        rounds: int = 10, processes: int = 2, client_kind: str = "boto3", server: str = "new",
        slowloris: int = 0, slowloris_seconds: float = 20.0, max_files: int | None = None) -> dict[str, Any]:
    slow: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="bench-market-") as tmp:
        state = Path(tmp) / "state"
        proc, url = _start_server(state, server, max_files)
        operator, close_operator = offline(state)  # adds the bench's workers, as the operator would
        clients: _Clients | None = None
        try:
            client = make_client("local", url, credentials_file=state / "credentials", max_rps=0, max_attempts=3)
            workers = WorkerClient(url, operator=operator)
            names = [f"ABENCH{i:03d}" for i in range(per_hit)]
            crowd_names = [f"ACROWD{i:04d}" for i in range(crowd)]
            for w in names + crowd_names:
                workers.register(w)
            clients = _Clients(processes, threads, url, state / "credentials", workers.sessions(), client_kind)
            type_id = client.call("create_hit_type", Title="Bench", Description="bench", Reward="0.05",
                                  AssignmentDurationInSeconds=3600, AutoApprovalDelayInSeconds=86400)["HITTypeId"]
            stats, hit_ids = _phase(clients, "post", range(hits), proc.pid, {"type_id": type_id, "per_hit": per_hit, "token": "bench"})
            phases = [stats]
            jobs = [(h, w) for h in hit_ids for w in names]
            phases.append(_phase(clients, "work", jobs, proc.pid)[0])
            stats, pages = _phase(clients, "collect", hit_ids, proc.pid)
            collected = [aid for ids in pages for aid in ids]
            phases += [stats, _phase(clients, "approve", collected, proc.pid)[0]]
            phases += _crowd_phases(client, clients, crowd_names, open_hits, rounds, proc.pid)
            peak = _peak_rss_kib(proc.pid)
            if slowloris:
                slow = _slowloris(url, state / "credentials", slowloris, slowloris_seconds)
        finally:
            if clients is not None:
                clients.close()
            close_operator()
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    total_req = sum(p["requests"] for p in phases)
    total_s = sum(p["seconds"] for p in phases)
    return {"server": server, "hits": hits, "assignments": len(collected), "threads": threads, "processes": processes,
            "client": client_kind, "open_hits": open_hits, "crowd": crowd, "phases": phases, "slowloris": slow,
            "server_max_files": max_files,
            "requests": total_req, "seconds": round(total_s, 2), "rps": round(total_req / total_s, 1) if total_s else 0.0,
            "server_peak_rss_mib": round(peak / 1024, 1) if peak else None}


def _slowloris(url: str, credentials_file: Path, sockets: int, seconds: float) -> dict[str, Any]:
    """`sockets` connections trickling a header byte every 8 s while `/health` and a signed
    `GetAccountBalance` (new connection each, 5 s allowed) are asked every half second."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < sockets + 256:  # this process holds the attacking sockets
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, sockets + 256) if hard != resource.RLIM_INFINITY
                                                    else sockets + 256, hard))
    port = int(url.rsplit(":", 1)[1])
    trickle = Trickle("127.0.0.1", port, sockets, interval=8.0).start()
    try:
        time.sleep(2.0)
        result = probe(url, read_credentials_file(credentials_file, "default"), seconds=seconds, every=0.5, timeout=5.0)
    finally:
        trickle.stop()
    return {"sockets": sockets, "seconds": seconds, "reconnects": trickle.reconnects, **result.summary()}


def _crowd_phases(client: Any, clients: _Clients, names: list[str], open_hits: int, rounds: int,
                  server_pid: int) -> list[dict[str, Any]]:
    """`open_hits` HITs of 3 assignments each, then the crowd x `rounds`: list available HITs, accept one.

    Each worker takes a random HIT from its first page (as a person picks from the list), so the listing
    has to walk past what that worker already holds and what others have filled.
    """
    type_id = client.call("create_hit_type", Title="Open", Description="open work", Reward="0.05",
                          AssignmentDurationInSeconds=3600, AutoApprovalDelayInSeconds=86400)["HITTypeId"]
    phases = [_phase(clients, "post-open", range(open_hits), server_pid, {"type_id": type_id, "per_hit": 3, "token": "open"})[0]]
    rng = random.Random(12)
    order: list[str] = []
    for _ in range(rounds):  # every worker once per round, in a new order each round
        order += rng.sample(names, len(names))
    picks = [rng.random() for _ in order]
    jobs = list(zip(order, picks, strict=True))
    phases.append(_phase(clients, "workers", jobs, server_pid, key=lambda job: job[0])[0])
    return phases


def compare(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The new server against the legacy one, phase by phase, with the issue's checks: no phase slower,
    p99 under 50 ms, and at least 500 req/s wherever the legacy server reached it."""
    old = {p["phase"]: p for p in results["legacy"]["phases"]}
    rows = []
    for p in results["new"]["phases"]:
        o = old[p["phase"]]
        rows.append({"phase": p["phase"], "legacy_rps": o["rps"], "new_rps": p["rps"],
                     "ratio": round(p["rps"] / o["rps"], 2) if o["rps"] else None,
                     "legacy_p50_ms": o["p50_ms"], "new_p50_ms": p["p50_ms"],
                     "legacy_p99_ms": o["p99_ms"], "new_p99_ms": p["p99_ms"],
                     "not_slower": p["rps"] >= o["rps"], "p99_under_50ms": p["p99_ms"] < 50.0,
                     "500_where_legacy_did": p["rps"] >= 500 or o["rps"] < 500})
    checks = {k: all(r[k] for r in rows) for k in ("not_slower", "p99_under_50ms", "500_where_legacy_did")}
    return {"phases": rows, "checks": checks}


def _print_one(result: dict[str, Any]) -> None:
    for p in result["phases"]:
        print(f"  {p['phase']:<9} {p['requests']:>6} req  {p['seconds']:>7.2f} s  {p['rps']:>8.1f} req/s  "
              f"p50 {p['p50_ms']:.2f} ms  p99 {p['p99_ms']:.2f} ms  CPU/req server {p['server_cpu_ms_per_req']} ms, "
              f"client {p['client_cpu_ms_per_req']} ms")
    print(f"  total    {result['requests']} req in {result['seconds']} s = {result['rps']} req/s; "
          f"server peak RSS {result['server_peak_rss_mib']} MiB")


def _print_slow(name: str, slow: dict[str, Any] | None) -> None:
    if not slow:
        return
    h, b = slow["health"], slow["balance"]
    print(f"  {name}: {slow['sockets']} trickling sockets for {slow['seconds']:.0f} s: "
          f"/health answered {h['answered']}/{h['probes']} (p50 {h['p50_ms']} ms, max {h['max_ms']} ms); "
          f"GetAccountBalance {b['answered']}/{b['probes']} (p50 {b['p50_ms']} ms, max {b['max_ms']} ms)")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="campaign bench market")
    ap.add_argument("--hits", type=int, default=2000, help="HITs to create (default: 2000)")
    ap.add_argument("--assignments", type=int, default=10000, help="total assignments (per HIT = assignments / hits)")
    ap.add_argument("--processes", type=int, default=2, help="client processes (each its own boto3 client)")
    ap.add_argument("--threads", type=int, default=4, help="threads per client process")
    # The bench measures the marketplace: boto3 spends 2-4x the server's CPU per call, which on a 2-core
    # machine measures the client. The light client sends the same SigV4-signed requests over HTTP.
    ap.add_argument("--client", choices=CLIENTS, default="sigv4",
                    help="the requesters' client: sigv4 (default: a light signed client, the same requests) or boto3 (as MTurk is called)")
    ap.add_argument("--open-hits", type=int, default=10_000, help="open HITs the crowd phase lists from")
    ap.add_argument("--crowd", type=int, default=200, help="distinct workers in the crowd phase")
    ap.add_argument("--rounds", type=int, default=10, help="list-and-accept rounds per worker")
    ap.add_argument("--quick", action="store_true", help="50 HITs x 5 assignments; 300 open HITs, 20 workers x 5")
    ap.add_argument("--server", choices=("new", "legacy", "both"), default="new",
                    help="new: the marketplace as served (uvicorn); legacy: the standard library's server it replaced; "
                         "both: legacy then new with the same client, side by side")
    ap.add_argument("--slowloris", type=int, default=0, metavar="N",
                    help="after the phases, N sockets trickle header bytes while /health and GetAccountBalance are timed")
    ap.add_argument("--slowloris-seconds", type=float, default=20.0, help="how long the slow clients hold their connections (default: 20)")
    ap.add_argument("--max-files", type=int, default=None,
                    help="the server's file limit (ulimit -n), e.g. 1024 with --slowloris 1100")
    ap.add_argument("--json", action="store_true", help="print exactly one JSON object")
    args = ap.parse_args(argv)
    hits, total = (50, 250) if args.quick else (args.hits, args.assignments)
    per_hit = max(1, total // max(1, hits))
    open_hits, crowd, rounds = (300, 20, 5) if args.quick else (args.open_hits, args.crowd, args.rounds)
    servers = ["legacy", "new"] if args.server == "both" else [args.server]
    results = {name: run(hits, per_hit, args.threads, open_hits, crowd, rounds, args.processes, args.client, name,
                         args.slowloris, args.slowloris_seconds, args.max_files) for name in servers}
    if args.server != "both":
        result = results[args.server]
        if args.json:
            print(dumps(result))
            return 0
        print(f"marketplace bench ({args.server} server): {result['hits']} HITs, {result['assignments']} assignments, "
              f"{args.processes} client processes x {args.threads} threads, {args.client} requesters; "
              f"crowd of {crowd} on {open_hits} open HITs")
        _print_one(result)
        _print_slow(args.server, result["slowloris"])
        return 0
    comparison = compare(results)
    if args.json:
        print(dumps({"servers": results, "comparison": comparison}))
        return 0
    print(f"marketplace bench, legacy then new server, same client: {hits} HITs, {per_hit * hits} assignments, "
          f"{args.processes} client processes x {args.threads} threads, {args.client} requesters; "
          f"crowd of {crowd} on {open_hits} open HITs")
    print(f"  {'phase':<9} {'legacy req/s':>12} {'new req/s':>10} {'new/old':>7}   {'legacy p50/p99 ms':>18}   {'new p50/p99 ms':>15}")
    for r in comparison["phases"]:
        print(f"  {r['phase']:<9} {r['legacy_rps']:>12.1f} {r['new_rps']:>10.1f} {r['ratio']:>7}   "
              f"{r['legacy_p50_ms']:>8.2f} / {r['legacy_p99_ms']:<7.2f}   {r['new_p50_ms']:>6.2f} / {r['new_p99_ms']:<7.2f}")
    for name in servers:
        _print_slow(name, results[name]["slowloris"])
    print("  checks: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in comparison["checks"].items()))
    return 0
