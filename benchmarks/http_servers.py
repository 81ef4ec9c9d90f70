"""Which HTTP server library should carry the marketplace? The same tiny application on each candidate,
measured the way the marketplace is used and attacked (docs/http-server.md shows a run):

- throughput: 8 client threads (in another process), each a keep-alive connection, POSTing a 300-byte
  JSON body and reading a 100-byte JSON answer, for `--seconds`;
- slow clients: the server process at `ulimit -n 1024`, 1,100 sockets trickling a header byte every 8 s,
  `/health` asked on a new connection every half second (5 s allowed): how many were answered;
- one trickler at a byte per second: after how long the server cuts a header section that never ends
  (capped at 40 s).

    python benchmarks/http_servers.py            # every candidate
    python benchmarks/http_servers.py uvicorn-guarded waitress

Candidates: the standard library's ThreadingHTTPServer, uvicorn (httptools and h11 parsers, as shipped),
uvicorn under campaign.web.server's guards, hypercorn, waitress. Loopback only.
"""

from __future__ import annotations

import http.client
import json
import resource
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

BODY = json.dumps({"x": "y" * 280}).encode()
ANSWER = json.dumps({"ok": True, "pad": "z" * 80}).encode()
CANDIDATES = ("stdlib", "uvicorn-httptools", "uvicorn-h11", "uvicorn-guarded", "hypercorn", "waitress")


def _work(body: bytes) -> bytes:
    json.loads(body or b"{}")
    return ANSWER


async def asgi_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            break
    out = _work(body)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})


def wsgi_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    n = int(environ.get("CONTENT_LENGTH") or 0)
    out = _work(environ["wsgi.input"].read(n) if n else b"")
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(out)))])
    return [out]


def serve(kind: str) -> None:
    """Runs in the server's process (file limit 1024); prints the port, serves until killed."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    print(sock.getsockname()[1], flush=True)
    if kind == "stdlib":
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            timeout = 20

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                out = _work(self.rfile.read(n))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST

        sock.close()
        ThreadingHTTPServer.request_queue_size = 128  # as the marketplace's old server had it
        srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        srv.daemon_threads = True
        # the port printed above is not this one: re-announce
        print(srv.server_address[1], flush=True)
        srv.serve_forever()
    elif kind.startswith("uvicorn-") and kind != "uvicorn-guarded":
        import uvicorn

        sock.setblocking(False)
        cfg = uvicorn.Config(asgi_app, http=kind.split("-")[1], loop="asyncio", lifespan="off", log_level="critical",
                             access_log=False, timeout_keep_alive=5)
        print(sock.getsockname()[1], flush=True)
        uvicorn.Server(cfg).run(sockets=[sock])
    elif kind == "uvicorn-guarded":
        from campaign.web.request import Refusal, Request, Response
        from campaign.web.server import Limits, RunningServer

        class App:
            max_body = 1 << 20

            def handle(self, request: Request) -> Response:
                return Response(200, "application/json", _work(request.body))

            def refuse(self, method: str, path: str, refusal: Refusal) -> Response:
                return Response(refusal.status, "application/json", b"{}", close=True)

        sock.setblocking(False)
        print(sock.getsockname()[1], flush=True)
        RunningServer({sock: App()}, Limits())
        threading.Event().wait()
    elif kind == "hypercorn":
        import asyncio

        from hypercorn.asyncio import serve as hserve
        from hypercorn.config import Config

        sock.close()
        cfg = Config()
        cfg.bind = ["127.0.0.1:0"]
        cfg.keep_alive_timeout = 5
        cfg.accesslog = None
        cfg.errorlog = None
        # hypercorn binds itself; find the port through a pre-bound socket it adopts (fd://)
        s2 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s2.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s2.bind(("127.0.0.1", 0))
        s2.listen(2048)
        cfg.bind = [f"fd://{s2.fileno()}"]
        print(s2.getsockname()[1], flush=True)
        asyncio.run(hserve(asgi_app, cfg))  # type: ignore[arg-type]
    elif kind == "waitress":
        import waitress

        print(sock.getsockname()[1], flush=True)
        waitress.serve(wsgi_app, sockets=[sock], threads=8, channel_timeout=5, connection_limit=900,
                       cleanup_interval=2, _quiet=True)
    else:
        raise SystemExit(f"unknown server {kind}")


def _start(kind: str) -> tuple[subprocess.Popen, int]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

    proc = subprocess.Popen([sys.executable, __file__, "serve", kind], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, preexec_fn=limit)
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    if kind in ("stdlib", "hypercorn"):  # they listen on a socket of their own: its port comes second
        port = int(proc.stdout.readline())
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, port


def _cpu(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0


def throughput(port: int, seconds: float, threads: int = 8, pid: int = 0) -> dict[str, float]:
    cpu0 = _cpu(pid) if pid else 0.0
    end = time.monotonic() + seconds
    lat: list[float] = []
    errors: list[int] = []

    def run() -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        n = 0
        while time.monotonic() < end:
            t = time.perf_counter()
            try:
                conn.request("POST", "/", body=BODY, headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
            except (OSError, http.client.HTTPException):
                errors.append(1)
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                continue
            lat.append(time.perf_counter() - t)
            n += 1
        conn.close()
        return n

    t0 = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(lambda _: run(), range(threads)))
    lat.sort()
    cpu = (_cpu(pid) - cpu0) if pid else 0.0
    return {"rps": round(total / (time.monotonic() - t0), 1), "server_cpu_us_per_req": round(cpu * 1e6 / max(1, total)), "p50_ms": round(lat[len(lat) // 2] * 1000, 2),
            "p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 2), "errors": len(errors)}


def slow_clients(port: int, seconds: float) -> dict[str, Any]:
    sys.path.insert(0, ".")
    from campaign.bench.slowloris import Trickle

    def _health(host: str, port: int, timeout: float) -> float | None:
        t = time.perf_counter()
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        try:
            conn.request("GET", "/health")
            resp = conn.getresponse()
            resp.read()
            ok = resp.status == 200
        except (OSError, http.client.HTTPException):
            return None
        finally:
            conn.close()
        elapsed = time.perf_counter() - t
        return elapsed * 1000 if ok and elapsed <= timeout else None

    trickle = Trickle("127.0.0.1", port, 1100, interval=8.0).start()
    answered, probes, worst = 0, 0, 0.0
    try:
        time.sleep(2.0)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t = time.monotonic()
            ms = _health("127.0.0.1", port, 5.0)
            probes += 1
            if ms is not None:
                answered += 1
                worst = max(worst, ms)
            time.sleep(max(0.0, 0.5 - (time.monotonic() - t)))
    finally:
        trickle.stop()
    return {"answered": answered, "probes": probes, "max_ms": round(worst, 1)}


def header_cut(port: int, cap: float = 40.0) -> float | None:
    """Seconds until the server closes a connection sending one header byte per second (None: not within cap)."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        line = b"GET /health HTTP/1.1\r\nHost: a\r\nX-Slow: " + b"a" * 1000
        for i in range(int(cap)):
            try:
                s.send(line[i:i + 1])
                s.settimeout(1.0)
                if s.recv(1000) == b"":
                    return round(time.monotonic() - t0, 1)
                return round(time.monotonic() - t0, 1)  # an error answer (408/400) also ends it
            except TimeoutError:
                continue
            except OSError:
                return round(time.monotonic() - t0, 1)
    return None


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        serve(argv[1])
        return 0
    only_throughput = "--throughput" in argv
    kinds = [a for a in argv if not a.startswith("--")] or list(CANDIDATES)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    rows = []
    for kind in kinds:
        proc, port = _start(kind)
        try:
            tp = throughput(port, 4.0, pid=proc.pid)
            if only_throughput:
                print(json.dumps({"server": kind, **tp}), flush=True)
                continue
            cut = header_cut(port)
            slow = slow_clients(port, 20.0)
        finally:
            proc.kill()
            proc.wait()
        row = {"server": kind, **tp, "header_cut_s": cut, "slowloris_health": f"{slow['answered']}/{slow['probes']}",
               "slowloris_max_ms": slow["max_ms"]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"{'server':<18} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'header cut':>11} {'/health under 1,100 tricklers':>30}")
    for r in rows:
        cut = f"{r['header_cut_s']} s" if r["header_cut_s"] is not None else "never (40 s)"
        print(f"{r['server']:<18} {r['rps']:>8} {r['p50_ms']:>7} {r['p99_ms']:>7} {cut:>11} "
              f"{r['slowloris_health']:>14} (max {r['slowloris_max_ms']} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
