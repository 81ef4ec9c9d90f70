"""Fault injection for the requester API: throttling, random ServiceFaults, added latency, visibility lag.

The campaign must survive what the real service does under load (ThrottlingException after a burst,
an occasional 500, slow answers, a just-submitted assignment not yet visible). These knobs let tests
and benchmarks produce those conditions on demand and reproducibly (seeded RNG, real-time bucket).
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass
class FaultConfig:
    throttle_rate: float = 0.0  # requests per second refilled; 0 = no throttling
    throttle_burst: float = 10.0
    fault_rate: float = 0.0  # probability of a ServiceFault per request
    latency_ms: float = 0.0
    visibility_lag: float = 0.0  # clock seconds a submission stays invisible to the requester
    seed: int = 0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FaultConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown fault settings: {', '.join(sorted(unknown))}")
        values: dict[str, Any] = {k: (int(v) if k == "seed" else float(v)) for k, v in d.items()}
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Faults:
    """Decides per request: throttle? fault? and how long to wait first."""

    def __init__(self, config: FaultConfig | None = None) -> None:
        self._lock = threading.Lock()
        self.set(config or FaultConfig())

    def set(self, config: FaultConfig) -> None:
        with self._lock:
            self.config = config
            self._rng = random.Random(config.seed)
            self._tokens = config.throttle_burst
            self._last = time.monotonic()

    def decide(self) -> str | None:
        """None (serve), "throttle" or "fault"; sleeps for the configured latency first."""
        with self._lock:
            cfg = self.config
            verdict = None
            if cfg.throttle_rate > 0:
                t = time.monotonic()
                self._tokens = min(cfg.throttle_burst, self._tokens + (t - self._last) * cfg.throttle_rate)
                self._last = t
                if self._tokens >= 1:
                    self._tokens -= 1
                else:
                    verdict = "throttle"
            if verdict is None and cfg.fault_rate > 0 and self._rng.random() < cfg.fault_rate:
                verdict = "fault"
            latency = cfg.latency_ms
        if latency > 0:
            time.sleep(latency / 1000.0)
        return verdict
