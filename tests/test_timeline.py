"""The timeline of a virtual-time run: passes at their intervals, crowds at their own due times and
right after any pass, the clock moved straight to the next due instant."""

from __future__ import annotations

import math

import pytest

from campaign.clock import VirtualClock, is_virtual, work_deadline
from campaign.timeline import Timeline


class FakeCrowd:
    def __init__(self, clock: VirtualClock, arrivals: list[float]) -> None:
        self.clock, self.arrivals, self.steps = clock, sorted(arrivals), []  # type: list[float]

    def step(self) -> int:
        self.steps.append(self.clock.now())
        self.arrivals = [a for a in self.arrivals if a > self.clock.now()]
        return 0

    def next_due(self) -> float:
        return self.arrivals[0] if self.arrivals else math.inf


def test_the_clock_jumps_to_each_due_instant_and_passes_come_first() -> None:
    clock = VirtualClock(start=1000.0, speed=3600)
    order: list[tuple[str, float]] = []
    tl = Timeline(clock)
    tl.add_pass("a", lambda: order.append(("a", clock.now())), interval=1800)
    tl.add_pass("b", lambda: order.append(("b", clock.now())), interval=3600)
    crowd = FakeCrowd(clock, [1500.0])
    tl.add_crowd(crowd)
    for _ in range(3):
        assert tl.step()
    assert order == [("a", 1000.0), ("b", 1000.0), ("a", 2800.0)]
    # the crowd acts after the passes at 1000, at its own arrival (1500) with no pass, after the pass at 2800
    assert crowd.steps == [1000.0, 1500.0, 2800.0]
    assert clock.now() == 2800.0


def test_a_crowd_with_nothing_ahead_is_only_woken_by_a_pass() -> None:
    clock = VirtualClock(start=0.0)
    tl = Timeline(clock)
    crowd = FakeCrowd(clock, [])
    tl.add_crowd(crowd)
    assert tl.step()  # its first look
    assert not tl.step()  # nothing is ever due again: the timeline says so instead of spinning
    assert crowd.steps == [0.0]


def test_a_failing_crowd_is_reported_and_the_run_goes_on() -> None:
    clock = VirtualClock(start=0.0)
    tl = Timeline(clock)
    seen: list[Exception] = []

    class Broken(FakeCrowd):
        def step(self) -> int:
            raise RuntimeError("boom")

    tl.add_crowd(Broken(clock, []), on_error=seen.append)
    tl.add_pass("a", lambda: None, interval=10)
    assert tl.step() and tl.step()
    assert [str(e) for e in seen] == ["boom", "boom"]


def test_virtual_time_never_moves_back_and_never_sleeps() -> None:
    clock = VirtualClock(start=50.0)
    clock.move_to(40.0)
    assert clock.now() == 50.0
    with pytest.raises(RuntimeError):
        clock.sleep(1.0)
    assert is_virtual(clock)
    assert work_deadline(clock, 0.0) == math.inf  # a pass on virtual time never runs out of wall time
