"""Slow clients against a server, and what other clients see meanwhile.

`Trickle` holds `n` sockets that each send one byte of a header section every `interval` seconds and
reconnect when the server cuts them (as an attacker would); `probe` meanwhile asks `/health` on a fresh
connection and makes a signed `GetAccountBalance`, each with a `timeout`, and records how long every
answer took (None: no answer in time). Used by `campaign bench market --slowloris N` and by the test
that the marketplace keeps answering under such a load. Loopback addresses only.
"""

from __future__ import annotations

import errno
import http.client
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from campaign.bench.market_client import SignedClient
from campaign.credentials import Credentials

_HEADER = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4000


class Trickle:
    def __init__(self, host: str, port: int, n: int, interval: float = 8.0) -> None:
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError("slow clients are only sent to loopback addresses")
        self.host, self.port, self.n, self.interval = host, port, n, interval
        self._stop = threading.Event()
        self._socks: list[tuple[socket.socket | None, int]] = []
        self.opened = 0
        self.reconnects = 0
        self._thread = threading.Thread(target=self._run, name="slowloris", daemon=True)

    def _connect(self) -> socket.socket | None:
        s = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        code = s.connect_ex((self.host, self.port))
        if code not in (0, errno.EINPROGRESS, errno.EAGAIN):
            s.close()
            return None
        self.opened += 1
        return s

    def start(self, batch: int = 100, settle: float = 1.0) -> Trickle:
        """Connect in batches, each given up to `settle` seconds to be accepted by the kernel (a burst
        larger than the server's listen backlog would mostly be dropped SYNs, retried much later)."""
        for first in range(0, self.n, batch):
            group = [self._connect() for _ in range(min(batch, self.n - first))]
            poller = select.poll()
            pending = {s.fileno(): s for s in group if s is not None}
            for fd in pending:
                poller.register(fd, select.POLLOUT)
            end = time.monotonic() + settle
            while pending and time.monotonic() < end:
                for fd, _ in poller.poll(50):
                    poller.unregister(fd)
                    pending.pop(fd, None)
            self._socks += [(s, 0) for s in group]
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            self._tick()
            if self._stop.wait(self.interval):
                return

    def _tick(self) -> None:
        for i, (s, sent) in enumerate(self._socks):
            if self._stop.is_set():
                return
            if s is None:
                self._socks[i] = (self._connect(), 0)
                self.reconnects += 1
                continue
            try:
                s.send(_HEADER[sent % len(_HEADER):sent % len(_HEADER) + 1])
                self._socks[i] = (s, sent + 1)
            except BlockingIOError:
                continue
            except OSError as exc:
                if exc.errno in (errno.ENOTCONN, errno.EAGAIN, errno.EINPROGRESS):  # still connecting
                    continue
                s.close()  # cut by the server: come back, as an attacker would
                self._socks[i] = (self._connect(), 0)
                self.reconnects += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 5)
        for s, _ in self._socks:
            if s is not None:
                s.close()
        self._socks = []


@dataclass
class ProbeResult:
    health_ms: list[float | None] = field(default_factory=list)
    balance_ms: list[float | None] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        def one(xs: list[float | None]) -> dict[str, Any]:
            ok = sorted(x for x in xs if x is not None)
            return {"probes": len(xs), "answered": len(ok),
                    "p50_ms": round(ok[len(ok) // 2], 1) if ok else None,
                    "max_ms": round(ok[-1], 1) if ok else None}
        return {"health": one(self.health_ms), "balance": one(self.balance_ms)}


def _health(host: str, port: int, timeout: float) -> float | None:
    t = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", "/health")
        resp = conn.getresponse()
        ok = resp.status == 200 and resp.read() == b'{"ok": true}'
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()
    elapsed = time.perf_counter() - t
    return elapsed * 1000 if ok and elapsed <= timeout else None


def _balance(url: str, credentials: Credentials, timeout: float) -> float | None:
    t = time.perf_counter()
    try:
        out = SignedClient(url, credentials, timeout=timeout).call("GetAccountBalance")
    except Exception:  # noqa: BLE001 - any failure is "no answer"
        return None
    elapsed = time.perf_counter() - t
    return elapsed * 1000 if "AvailableBalance" in out and elapsed <= timeout else None


def probe(url: str, credentials: Credentials, seconds: float, every: float = 0.5, timeout: float = 5.0) -> ProbeResult:
    """Ask `/health` and `GetAccountBalance` (a new connection each) every `every` seconds for `seconds`."""
    host, _, port = url.removeprefix("http://").rpartition(":")
    result = ProbeResult()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.monotonic()
        result.health_ms.append(_health(host.strip("[]"), int(port), timeout))
        result.balance_ms.append(_balance(url, credentials, timeout))
        time.sleep(max(0.0, every - (time.monotonic() - t)))
    return result
