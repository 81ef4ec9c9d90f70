"""Clocks shared by the marketplace, the simulated crowd and the daemon.

A simulation needs lifetimes, assignment durations and auto-approval delays of hours or days to pass in
seconds, while a real run must use the wall clock. Every component that reasons about time takes a
`Clock` instead of calling `time.time()`, so one `ScaledClock` object handed to the in-process
marketplace and to the crowd makes them agree on "now".
"""

from __future__ import annotations

import math
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


class VirtualClock:
    """Discrete-event time for a simulated run: it stands still while the parts of the run work and is
    moved by the run's timeline (`campaign.timeline`) straight to the next due event, once everything
    due now is done. A simulation then costs only its CPU work, and what happens in it depends on the
    seed alone: nothing in it can observe how fast the machine is.

    `speed` is the spec's simulated seconds per real second; a duration given in real seconds (a poll
    interval, a crowd's back-off) is that many times `speed` of this clock's time, as on a `ScaledClock`.
    """

    virtual = True

    def __init__(self, start: float, speed: float = 1.0) -> None:
        if speed <= 0:
            raise ValueError(f"clock speed must be positive, got {speed}")
        self.speed = float(speed)
        self._t = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._t

    def sleep(self, seconds: float) -> None:
        """Nothing sleeps on virtual time: a part that must wait says when it is next due instead."""
        raise RuntimeError("a part of a simulated run slept on the virtual clock; it must tell the timeline when it is due")

    def move_to(self, t: float) -> None:
        """Jump to `t`; never backwards (an earlier `t` leaves the clock where it is)."""
        with self._lock:
            if t > self._t:
                self._t = float(t)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._t += max(0.0, seconds)


def is_virtual(clock: Clock) -> bool:
    """Whether `clock` is a simulation's event time (nothing may depend on wall time then)."""
    return bool(getattr(clock, "virtual", False))


def work_deadline(clock: Clock, seconds: float) -> float:
    """The `time.monotonic()` after which a pass stops taking new work and leaves the rest for the next.

    On virtual time a pass never runs out of time: how much one pass does must not depend on the
    machine's speed or load, or a seed would not decide the run."""
    return math.inf if is_virtual(clock) else time.monotonic() + seconds


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
