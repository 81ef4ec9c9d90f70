"""The timeline of a simulated run on virtual time: every part that acts by itself (each campaign's
pass, each simulated crowd) is an actor that says when it is next due; the timeline moves the
`VirtualClock` straight to the earliest due time, lets every actor due then act, in a fixed order, and
repeats. Parts that only answer requests (the built-in marketplace, the Prolific emulator, the task
site) need no place on it: they read the clock when asked, and every request to them is answered
before the actor that made it finishes.

Within one instant the campaigns' passes act first (in the spec's order), then the crowds, which also
act whenever a pass acted since their last turn: what a pass put up is seen by the crowd at the same
simulated instant, as people who keep a marketplace's page open would. Nothing here reads the wall
clock, so a seed decides the whole run whatever the machine's load.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from campaign.clock import VirtualClock


class Crowd(Protocol):
    """A simulated crowd as the timeline drives it (`SimulatedCrowd`, `ParticipantCrowd`)."""

    def step(self) -> int: ...

    def next_due(self) -> float: ...


@dataclass
class Pass:
    """A campaign's pass, due every `interval` seconds of simulated time from the first instant."""

    name: str
    run: Callable[[], None]
    interval: float
    due: float = -math.inf


@dataclass
class CrowdTurn:
    crowd: Crowd
    on_error: Callable[[Exception], None] | None = None
    woken: bool = True  # something changed on the marketplace since this crowd last looked


@dataclass
class Timeline:
    clock: VirtualClock
    passes: list[Pass] = field(default_factory=list)
    crowds: list[CrowdTurn] = field(default_factory=list)
    instants: int = 0  # how many distinct instants the run has stepped through

    def add_pass(self, name: str, run: Callable[[], None], interval: float) -> None:
        if interval <= 0:
            raise ValueError(f"a pass's interval must be positive, got {interval}")
        self.passes.append(Pass(name, run, interval, due=self.clock.now()))

    def add_crowd(self, crowd: Crowd, on_error: Callable[[Exception], None] | None = None) -> None:
        self.crowds.append(CrowdTurn(crowd, on_error))

    def next_due(self) -> float:
        now = self.clock.now()
        due = [p.due for p in self.passes]
        for turn in self.crowds:
            due.append(now if turn.woken else turn.crowd.next_due())
        return min(due, default=math.inf)

    def step(self) -> bool:
        """Move to the next due instant and let everything due then act; False when nothing is ever
        due again (no pass and no crowd with anything ahead)."""
        t = self.next_due()
        if t == math.inf:
            return False
        self.clock.move_to(t)
        now = self.clock.now()
        self.instants += 1
        acted = False
        for p in self.passes:
            if p.due <= now:
                p.run()
                p.due = now + p.interval
                acted = True
        for turn in self.crowds:
            if acted:
                turn.woken = True
            if turn.woken or turn.crowd.next_due() <= now:
                turn.woken = False
                try:
                    turn.crowd.step()
                except Exception as exc:  # a crowd's failure is reported, never the end of the run
                    if turn.on_error is None:
                        raise
                    turn.on_error(exc)
        return True
