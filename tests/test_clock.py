"""A child process rebuilds the daemon's simulated clock from `ScaledClock.shared()` and tells the
same time (the simulated crowd runs in one, see `campaign.crowd.child`)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from campaign.clock import ScaledClock


def test_a_shared_clock_tells_the_same_time_in_another_process():
    clock = ScaledClock(speed=3600.0, start=1_700_000_000.0)
    clock.advance(120.0)
    time.sleep(0.05)
    code = ("import json, sys, time; from campaign.clock import ScaledClock; "
            "c = ScaledClock.from_shared(json.loads(sys.argv[1])); m = time.monotonic(); "
            "print(json.dumps([c.now(), m]))")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(clock.shared())], capture_output=True, text=True, check=True)
    theirs, at = json.loads(out.stdout)
    ours = clock.shared()
    expected = ours["start"] + (at - ours["mono0"]) * ours["speed"]  # our clock at the instant the child read its own
    assert abs(theirs - expected) < 1e-3 * 3600
    assert theirs > 1_700_000_000.0 + 120.0 + 0.05 * 3600  # the advance and the time since are both in


def test_from_shared_keeps_speed_and_origin():
    clock = ScaledClock(speed=10.0, start=1000.0)
    copy = ScaledClock.from_shared(clock.shared())
    assert copy.speed == 10.0
    assert abs(copy.now() - clock.now()) < 0.01
