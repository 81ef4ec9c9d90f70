"""Clocks shared by the marketplace, the simulated crowd and the daemon.

A simulation needs lifetimes, assignment durations and auto-approval delays of hours or days to pass in
seconds, while a real run must use the wall clock. Every component that reasons about time takes a
`Clock` instead of calling `time.time()`, so one `ScaledClock` object handed to the in-process
marketplace and to the crowd makes them agree on "now".
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Anything that tells the current time as epoch seconds (UTC)."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None:
        """Sleep for `seconds` of this clock's time."""


class WallClock:
    """The real time; used for real marketplaces and real workers."""

    speed = 1.0

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class ScaledClock:
    """Clock time runs `speed` times faster than real time, starting at `start` (epoch seconds).

    Monotonic underneath, so a wall-clock adjustment cannot move simulated time backwards.
    """

    def __init__(self, speed: float = 1.0, start: float | None = None) -> None:
        if speed <= 0:
            raise ValueError(f"clock speed must be positive, got {speed}")
        self.speed = float(speed)
        self._start = time.time() if start is None else float(start)
        self._mono0 = time.monotonic()
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._start + self._offset + (time.monotonic() - self._mono0) * self.speed

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds / self.speed)

    def advance(self, seconds: float) -> None:
        """Jump forward (tests use this to pass an auto-approval delay at once)."""
        with self._lock:
            self._offset += seconds

    def shared(self) -> dict[str, float]:
        """What another process on this machine needs to build the same clock (`from_shared`): the
        monotonic clock is the machine's, so both then tell exactly the same time. A later `advance`
        moves only this process's clock."""
        with self._lock:
            return {"speed": self.speed, "start": self._start + self._offset, "mono0": self._mono0}

    @classmethod
    def from_shared(cls, shared: dict[str, float]) -> ScaledClock:
        """The clock `shared()` describes (in a child process of the one that made it)."""
        clock = cls(speed=float(shared["speed"]), start=float(shared["start"]))
        clock._mono0 = float(shared["mono0"])
        return clock


class ManualClock:
    """A clock that moves only when told to; for unit tests of time-dependent rules."""

    speed = 1.0

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._t = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._t

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._t += seconds
