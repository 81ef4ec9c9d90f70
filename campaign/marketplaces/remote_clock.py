"""Following a standalone marketplace's clock.

`campaign market serve --speed S` runs its own simulated clock, and so does the `campaign crowd run` that
works its HITs; daemons that post there hold no crowd of their own. Every time a daemon compares with
the marketplace's (a submission's age against half its auto-approval delay, an expiry, the collect
sweep's pace) is the marketplace's, so the daemon and the crowd must tell the same time as the
marketplace, not their own wall clock: a daemon on the wall clock at speed 600 saw every submission
as made in the future, never held work back as "late", and let it reach the marketplace's
auto-approval unreviewed. The marketplace tells its time on `GET /clock`; this builds the same clock here.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.request

from campaign.clock import ScaledClock, WallClock

TIMEOUT = 5.0  # seconds one request for the time may take
TRIES = 5  # a marketplace started a moment before its daemons may not answer yet
PAUSE = 1.0  # seconds between tries


class ClockUnavailable(Exception):
    """The marketplace did not tell its time; the message says where and why."""


def parse_clock(body: bytes) -> tuple[float, float]:
    """(now, speed) from a `/clock` answer; ValueError when it is not one."""
    data = json.loads(body.decode("utf-8"), parse_constant=lambda c: float("nan"))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    now, speed = data.get("now"), data.get("speed")
    if isinstance(now, bool) or isinstance(speed, bool) or not isinstance(now, (int, float)) or not isinstance(speed, (int, float)):
        raise ValueError("`now` and `speed` must be numbers")
    if not (math.isfinite(now) and now > 0 and math.isfinite(speed) and speed > 0):
        raise ValueError(f"now={now!r}, speed={speed!r} are not a clock")
    return float(now), float(speed)


def marketplace_clock(endpoint_url: str, timeout: float = TIMEOUT, tries: int | None = None, pause: float | None = None) -> WallClock | ScaledClock:
    """The clock of the marketplace at `endpoint_url`: the wall clock at speed 1, else a `ScaledClock`
    set to its time at the middle of the request (a loopback request's few milliseconds are a few
    simulated seconds at speed 600)."""
    url = endpoint_url.rstrip("/") + "/clock"
    problem = ""
    for attempt in range(max(1, TRIES if tries is None else tries)):
        if attempt:
            time.sleep(PAUSE if pause is None else pause)
        sent = time.monotonic()
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - the spec's own endpoint
                body = resp.read(4096)
        except (urllib.error.URLError, OSError) as exc:
            problem = str(getattr(exc, "reason", exc))
            continue
        back = time.monotonic()
        try:
            now, speed = parse_clock(body)
        except ValueError as exc:
            raise ClockUnavailable(f"{url} did not answer with a clock ({exc})") from None
        if speed == 1.0:
            return WallClock()
        return ScaledClock(speed=speed, start=now + (back - sent) / 2 * speed)
    raise ClockUnavailable(f"{url} did not answer ({problem}): is the marketplace (`campaign market serve`) running?")
