"""The marketplace server's CPU per request for one small signed call, legacy transport against new.

    python benchmarks/server_cpu.py [--requests 1000] [--rounds 3] [--op GetAccountBalance]

Starts each server as `campaign bench market` does (a subprocess), warms it up, then sends `--requests`
signed calls from each of 4 keep-alive threads in each of 2 client processes and reads the server
process's user + system CPU from /proc before and after. The servers alternate, round after round, so a
change in the machine's load hits both; CPU per request is far steadier than req/s on a shared machine.
"""

from __future__ import annotations

import argparse
import configparser
import multiprocessing as mp
import sys
import tempfile
import threading
import time
from pathlib import Path

from campaign.bench.market import _cpu_seconds, _start_server
from campaign.bench.market_client import SignedClient
from campaign.credentials import Credentials

PROCESSES, THREADS = 2, 4


def _client(url: str, credentials: Credentials, n: int, op: str, done: mp.Queue) -> None:
    client = SignedClient(url, credentials)
    threads = [threading.Thread(target=lambda: [client.call(op) for _ in range(n)]) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.put(1)


def measure(server: str, n: int, op: str) -> tuple[float, float]:
    """(server CPU µs per request, req/s)."""
    state = Path(tempfile.mkdtemp())
    proc, url = _start_server(state, server)
    try:
        cp = configparser.ConfigParser()
        cp.read(state / "credentials")
        section = cp[cp.sections()[0]]
        credentials = Credentials(section["aws_access_key_id"], section["aws_secret_access_key"])
        warm = SignedClient(url, credentials)
        for _ in range(50):
            warm.call(op)
        done: mp.Queue = mp.Queue()
        cpu0, t0 = _cpu_seconds(proc.pid), time.perf_counter()
        clients = [mp.Process(target=_client, args=(url, credentials, n, op, done)) for _ in range(PROCESSES)]
        for c in clients:
            c.start()
        for _ in clients:
            done.get()
        for c in clients:
            c.join()
        elapsed, cpu1 = time.perf_counter() - t0, _cpu_seconds(proc.pid)
        total = PROCESSES * THREADS * n
        assert cpu0 is not None and cpu1 is not None
        return (cpu1 - cpu0) * 1e6 / total, total / elapsed
    finally:
        proc.terminate()
        proc.wait()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1000, help="per client thread")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--op", default="GetAccountBalance")
    args = ap.parse_args(argv)
    results: dict[str, list[tuple[float, float]]] = {"legacy": [], "new": []}
    for _ in range(args.rounds):
        for server in results:
            results[server].append(measure(server, args.requests, args.op))
    for server, runs in results.items():
        cpu = sorted(r[0] for r in runs)
        rps = sorted(r[1] for r in runs)
        print(f"{server:6} {args.op}: server CPU per request {cpu[0]:.0f}-{cpu[-1]:.0f} us (median {cpu[len(cpu) // 2]:.0f}), "
              f"{rps[0]:.0f}-{rps[-1]:.0f} req/s over {len(runs)} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
