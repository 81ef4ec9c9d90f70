"""How many wrong sign-in codes the worker site takes before it stops listening, per address and per worker.

A sign-in code is long and random, so guessing one is hopeless; the limit is there so that nobody can try
(and so that a flood of guesses costs the server nothing). Only failures count. Past `limit` failures in
the last `window` seconds from one address, or aimed at one worker (a code names its worker:
`AWORKER-...`), every attempt from that address or for that worker is refused, the right code
included, until the oldest failures leave the window.

Behind a reverse proxy every request comes from the proxy's address, so the per-address limit then
applies to everyone at once; the per-worker limit still only locks the worker being guessed at.
State is in memory and bounded (`max_keys` addresses and workers, oldest dropped first).
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

WORKER_RE = re.compile(r"^(A[A-Z0-9]{1,63})-")
LIMIT = 10  # failures
WINDOW = 600.0  # seconds


def claimed_worker(code: str) -> str | None:
    """The worker a sign-in code names (codes issued since the per-worker limit begin with the id)."""
    m = WORKER_RE.match(code or "")
    return m.group(1) if m else None


class SignInLimiter:
    def __init__(self, limit: int = LIMIT, window: float = WINDOW, max_keys: int = 100_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.window, self.max_keys, self.clock = limit, window, max_keys, clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _keys(address: str, code: str) -> list[str]:
        worker = claimed_worker(code)
        return [f"addr:{address}"] + ([f"worker:{worker}"] if worker else [])

    def _recent(self, key: str, now: float) -> int:
        q = self._failures.get(key)
        if q is None:
            return 0
        while q and q[0] <= now - self.window:
            q.popleft()
        if not q:
            del self._failures[key]
            return 0
        return len(q)

    def blocked(self, address: str, code: str) -> float:
        """Seconds until an attempt from `address` with `code` may be tried again (0: it may be now)."""
        now = self.clock()
        with self._lock:
            waits = [self._failures[k][0] + self.window - now for k in self._keys(address, code)
                     if self._recent(k, now) >= self.limit]
        return max(waits, default=0.0)

    def failed(self, address: str, code: str) -> None:
        now = self.clock()
        with self._lock:
            for key in self._keys(address, code):
                q = self._failures.pop(key, None) or deque(maxlen=self.limit)
                q.append(now)
                self._failures[key] = q  # most recently failed last
            while len(self._failures) > self.max_keys:
                self._failures.popitem(last=False)
