"""`campaign bench market`: throughput, latency and memory of the built-in marketplace under a campaign's
load: post HITs through boto3, let workers accept and submit through the worker API, collect through
paginated ListAssignmentsForHIT and approve everything; then a crowd's view of a big marketplace: post
10,000 more HITs and let 200 workers list the HITs open to them and accept one, over and over.

The server runs as a subprocess so its peak memory (VmHWM) is its own, not the benchmark's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from campaign.market.client import make_client
from campaign.market.operator import offline
from campaign.market.worker_client import WorkerAPIError, WorkerClient

QUESTION = ('<HTMLQuestion xmlns="http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2011-11-11/HTMLQuestion.xsd">'
            '<HTMLContent><![CDATA[<!DOCTYPE html><html><body><form method="post" action="https://www.mturk.com/mturk/externalSubmit">'
            '<input type="hidden" name="assignmentId" value=""><p>Statement {i}</p><input name="score"></form></body></html>]]>'
            '</HTMLContent><FrameHeight>0</FrameHeight></HTMLQuestion>')


def _start_server(state: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "campaign", "market", "serve", "--port", "0", "--state", str(state)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip() if proc.stdout else ""
    if not line.startswith("http://"):
        proc.kill()
        raise RuntimeError(f"marketplace did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
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


def _phase(name: str, jobs: Sequence[Any], fn: Callable[[Any], int], threads: int, server_pid: int | None = None) -> dict[str, Any]:
    """Run fn over jobs on a thread pool; fn returns how many requests it made. Latency is per job call.

    Besides throughput and latency, the CPU milliseconds per request spent by the server process and by
    this (client) process: on a small machine the client's boto3 work can be what limits req/s.
    """
    lat: list[float] = []
    server_cpu0 = _cpu_seconds(server_pid) if server_pid else None
    client_cpu0 = time.process_time()

    def timed(job: Any) -> int:
        t = time.perf_counter()
        n = fn(job)
        lat.append((time.perf_counter() - t) / max(1, n))
        return n

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        requests = sum(pool.map(timed, jobs))
    wall = time.perf_counter() - t0
    client_cpu = time.process_time() - client_cpu0
    server_cpu1 = _cpu_seconds(server_pid) if server_pid else None
    lat.sort()
    q = (lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000) if lat else (lambda p: 0.0)
    per_req = max(1, requests)
    return {"phase": name, "requests": requests, "seconds": round(wall, 3), "rps": round(requests / wall, 1) if wall else 0.0,
            "p50_ms": round(q(0.50), 2), "p99_ms": round(q(0.99), 2),
            "server_cpu_ms_per_req": (round((server_cpu1 - server_cpu0) * 1000 / per_req, 3)
                                      if server_cpu0 is not None and server_cpu1 is not None else None),
            "client_cpu_ms_per_req": round(client_cpu * 1000 / per_req, 3)}


def run(hits: int, per_hit: int, threads: int = 8, open_hits: int = 10_000, crowd: int = 200,
        rounds: int = 10) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-market-") as tmp:
        state = Path(tmp) / "state"
        proc, url = _start_server(state)
        operator, close_operator = offline(state)  # adds the bench's workers, as the operator would
        try:
            client = make_client("local", url, credentials_file=state / "credentials", max_rps=0, max_attempts=3)
            workers = WorkerClient(url, operator=operator)
            names = [f"ABENCH{i:03d}" for i in range(per_hit)]
            for w in names:
                workers.register(w)
            type_id = client.call("create_hit_type", Title="Bench", Description="bench", Reward="0.05",
                                  AssignmentDurationInSeconds=3600, AutoApprovalDelayInSeconds=86400)["HITTypeId"]
            hit_ids: list[str] = []

            def post(i: int) -> int:
                h = client.call("create_hit_with_hit_type", HITTypeId=type_id, MaxAssignments=per_hit,
                                LifetimeInSeconds=86400, Question=QUESTION.format(i=i), UniqueRequestToken=f"bench-{i}")
                hit_ids.append(h["HIT"]["HITId"])
                return 1

            phases = [_phase("post", range(hits), post, threads, proc.pid)]

            def work(job: tuple[str, str]) -> int:
                hit_id, w = job
                aid = workers.accept(w, hit_id)["AssignmentId"]
                workers.submit(aid, [("score", "3")])
                return 2

            jobs = [(h, w) for h in hit_ids for w in names]
            phases.append(_phase("work", jobs, work, threads, proc.pid))
            collected: list[str] = []

            paginator = client.raw.get_paginator("list_assignments_for_hit")  # built once, as a client would

            def collect(hit_id: str) -> int:
                pages = 0
                for page in paginator.paginate(HITId=hit_id, PaginationConfig={"PageSize": 100}):
                    pages += 1  # MTurk's way: a page with a token, then an empty one
                    collected.extend(a["AssignmentId"] for a in page["Assignments"])
                return pages

            phases.append(_phase("collect", hit_ids, collect, threads, proc.pid))
            phases.append(_phase("approve", list(collected), lambda aid: (client.call("approve_assignment", AssignmentId=aid), 1)[1], threads, proc.pid))
            phases += _crowd_phases(client, workers, open_hits, crowd, rounds, threads, proc.pid)
            peak = _peak_rss_kib(proc.pid)
        finally:
            close_operator()
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    total_req = sum(p["requests"] for p in phases)
    total_s = sum(p["seconds"] for p in phases)
    return {"hits": hits, "assignments": len(collected), "threads": threads, "open_hits": open_hits, "crowd": crowd,
            "phases": phases,
            "requests": total_req, "seconds": round(total_s, 2), "rps": round(total_req / total_s, 1) if total_s else 0.0,
            "server_peak_rss_mib": round(peak / 1024, 1) if peak else None}


def _crowd_phases(client: Any, workers: WorkerClient, open_hits: int, crowd: int, rounds: int,
                  threads: int, server_pid: int) -> list[dict[str, Any]]:
    """`open_hits` HITs of 3 assignments each, then `crowd` workers x `rounds`: list available HITs, accept one.

    Each worker takes a random HIT from its first page (as a person picks from the list), so the listing
    has to walk past what that worker already holds and what others have filled.
    """
    type_id = client.call("create_hit_type", Title="Open", Description="open work", Reward="0.05",
                          AssignmentDurationInSeconds=3600, AutoApprovalDelayInSeconds=86400)["HITTypeId"]

    def post(i: int) -> int:
        client.call("create_hit_with_hit_type", HITTypeId=type_id, MaxAssignments=3, LifetimeInSeconds=86400,
                    Question=QUESTION.format(i=i), UniqueRequestToken=f"open-{i}")
        return 1

    phases = [_phase("post-open", range(open_hits), post, threads, server_pid)]
    names = [f"ACROWD{i:04d}" for i in range(crowd)]
    for w in names:
        workers.register(w)
    rng = random.Random(12)
    order: list[str] = []
    for _ in range(rounds):  # every worker once per round, in a new order each round
        order += rng.sample(names, crowd)
    picks = [rng.random() for _ in order]
    busy = {w: threading.Lock() for w in names}  # one person, one browser: a worker's own calls never overlap

    def list_and_accept(job: tuple[str, float]) -> int:
        w, pick = job
        with busy[w]:
            listed = workers.available(w, 100)
            if not listed:
                return 1
            try:
                workers.accept(w, listed[int(pick * len(listed))]["HITId"])
            except WorkerAPIError as exc:  # another worker took the last slot in between: a real outcome, still a request
                if exc.code != "NoAvailableSlot":
                    raise
            return 2

    phases.append(_phase("workers", list(zip(order, picks, strict=True)), list_and_accept, threads, server_pid))
    return phases


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="campaign bench market")
    ap.add_argument("--hits", type=int, default=2000)
    ap.add_argument("--assignments", type=int, default=10000, help="total assignments (per HIT = assignments / hits)")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--open-hits", type=int, default=10_000, help="open HITs the crowd phase lists from")
    ap.add_argument("--crowd", type=int, default=200, help="distinct workers in the crowd phase")
    ap.add_argument("--rounds", type=int, default=10, help="list-and-accept rounds per worker")
    ap.add_argument("--quick", action="store_true", help="50 HITs x 5 assignments; 300 open HITs, 20 workers x 5")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    hits, total = (50, 250) if args.quick else (args.hits, args.assignments)
    per_hit = max(1, total // max(1, hits))
    open_hits, crowd, rounds = (300, 20, 5) if args.quick else (args.open_hits, args.crowd, args.rounds)
    result = run(hits, per_hit, args.threads, open_hits, crowd, rounds)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"marketplace bench: {result['hits']} HITs, {result['assignments']} assignments, {args.threads} client threads; "
          f"crowd of {crowd} on {open_hits} open HITs")
    for p in result["phases"]:
        print(f"  {p['phase']:<9} {p['requests']:>6} req  {p['seconds']:>7.2f} s  {p['rps']:>8.1f} req/s  "
              f"p50 {p['p50_ms']:.2f} ms  p99 {p['p99_ms']:.2f} ms  CPU/req server {p['server_cpu_ms_per_req']} ms, "
              f"client {p['client_cpu_ms_per_req']} ms")
    print(f"  total    {result['requests']} req in {result['seconds']} s = {result['rps']} req/s; "
          f"server peak RSS {result['server_peak_rss_mib']} MiB")
    return 0
