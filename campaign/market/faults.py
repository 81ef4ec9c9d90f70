"""Fault injection for the requester API: throttling, random ServiceFaults, lost answers, added latency,
visibility lag.

The campaign must survive what the real service does under load (ThrottlingException after a burst,
an occasional 500, slow answers, a just-submitted assignment not yet visible, and the worst of them for
money: a 500 for a call that took effect, so the client cannot tell whether an approval or a bonus went
through and its retry meets the result of the first). These knobs let tests
and benchmarks produce those conditions on demand and reproducibly (seeded RNG, real-time bucket).
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import asdict, dataclass, fields
from typing import Any

# Each setting's allowed range (inclusive). Latency beyond a minute would hold a server thread for as long
# as a client's own time-out; a lag beyond a day is no test of anything the real service does.
LIMITS: dict[str, tuple[float, float]] = {
    "throttle_rate": (0.0, 1_000_000.0),
    "throttle_burst": (0.0, 1_000_000.0),
    "fault_rate": (0.0, 1.0),
    "lost_rate": (0.0, 1.0),
    "latency_ms": (0.0, 60_000.0),
    "visibility_lag": (0.0, 86_400.0),
    "seed": (0, 2**63 - 1),
}


@dataclass
class FaultConfig:
    """Fault settings; every value is a finite number inside `LIMITS` (checked on construction, so the
    command line, `/admin/faults` and tests all get the same ValueError for a bad one)."""

    throttle_rate: float = 0.0  # requests per second refilled; 0 = no throttling
    throttle_burst: float = 10.0
    fault_rate: float = 0.0  # probability of a ServiceFault per request
    lost_rate: float = 0.0  # probability that a request served is answered with a ServiceFault all the same
    latency_ms: float = 0.0
    visibility_lag: float = 0.0  # clock seconds a submission stays invisible to the requester
    seed: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            lo, hi = LIMITS[f.name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not lo <= value <= hi:
                raise ValueError(f"{f.name} must be a number from {lo:g} to {hi:g}, not {value!r}")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FaultConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown fault settings: {', '.join(sorted(unknown))}")
        values: dict[str, Any] = {}
        for k, v in d.items():
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise ValueError(f"{k} must be a number, not {type(v).__name__}")
            number = float(v)  # a string as the command line gives it; "nan" and "inf" fail the range check
            if k == "seed":
                if not number.is_integer():
                    raise ValueError(f"seed must be a whole number, not {v!r}")
                values[k] = int(v) if isinstance(v, int) else int(number)
            else:
                values[k] = number
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
            self._lost_rng = random.Random(config.seed + 1)  # its own stream: the other verdicts stay as they were
            self.lost = 0  # answers lost since these settings were made
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

    def lose(self) -> bool:
        """After a request took effect: whether its answer is lost (answered as a ServiceFault). Asked on
        every request served, so without the fault set it answers without taking the lock."""
        if self.config.lost_rate <= 0:
            return False
        with self._lock:
            lose = self.config.lost_rate > 0 and self._lost_rng.random() < self.config.lost_rate
            self.lost += lose
            return lose
