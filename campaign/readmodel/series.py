"""Pure arithmetic behind the dashboard: time buckets, sparklines, rates, projections, the campaign clock
and the daemon's liveness. No store or marketplace imports, so every rule is testable on plain numbers.

Two time bases live in the store: wall-clock seconds (events, ledger entries) and the campaign's clock
(collected_at, decided_at, submit_time; a simulated run's clock runs `speed` times faster). Rates and
projections are stated in campaign-clock time, because that is the time the auto-approval delay and
HIT lifetimes run on; liveness is judged in wall time, because that is when the daemon writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None], width: int, lo: float | None = None, hi: float | None = None) -> str:
    """One character per value (the last `width` values, resampled by averaging when there are more);
    a gap is a space. `lo`/`hi` fix the scale (e.g. 0..1 for rates) so two sparklines compare."""
    if width <= 0:
        return ""
    vals = resample(values, width)
    known = [v for v in vals if v is not None]
    if not known:
        return " " * len(vals)
    lo = min(known) if lo is None else lo
    hi = max(known) if hi is None else hi
    span = hi - lo
    out = []
    for v in vals:
        if v is None:
            out.append(" ")
            continue
        x = 0.5 if span <= 0 else (min(max(v, lo), hi) - lo) / span
        out.append(BARS[min(int(x * len(BARS)), len(BARS) - 1)])
    return "".join(out)


def resample(values: Sequence[float | None], width: int) -> list[float | None]:
    """Average consecutive values down to at most `width` points (gaps ignored inside a group)."""
    n = len(values)
    if n <= width:
        return list(values)
    out: list[float | None] = []
    for k in range(width):
        group = [v for v in values[k * n // width:(k + 1) * n // width] if v is not None]
        out.append(sum(group) / len(group) if group else None)
    return out


@dataclass(frozen=True)
class Buckets:
    """`n` equal time buckets from `start` to `end` (campaign clock)."""

    start: float
    end: float
    n: int

    @property
    def width(self) -> float:
        return max((self.end - self.start) / self.n, 1e-9)

    def index(self, t: float) -> int:
        return min(max(int((t - self.start) / self.width), 0), self.n - 1)


def weighted_series(counts: Iterable[tuple[str, int, int]], value: dict[str, float | None], n: int) -> list[float | None]:
    """Per bucket, the mean of `value[worker]` weighted by how much work each worker did in that bucket.

    `counts` holds (worker, bucket, assignments). This is "the work collected in each period, judged with
    today's evidence on its workers": a wave of spammers shows as a dip where their answers arrived.
    """
    num = [0.0] * n
    den = [0.0] * n
    for worker, b, c in counts:
        v = value.get(worker)
        if v is None or not 0 <= b < n:
            continue
        num[b] += v * c
        den[b] += c
    return [num[b] / den[b] if den[b] else None for b in range(n)]


def weighted_series_np(worker: np.ndarray, bucket: np.ndarray, value: np.ndarray, n: int) -> list[float | None]:
    """`weighted_series` over one row per assignment (worker index, bucket), with `value` per worker index
    (NaN where unknown): the same numbers, vectorised for a redraw at tens of thousands of answers."""
    if len(worker) == 0:
        return [None] * n
    v = value[worker]
    known = ~np.isnan(v)
    num = np.bincount(bucket[known], weights=v[known], minlength=n)
    den = np.bincount(bucket[known], minlength=n)
    return [float(num[b] / den[b]) if den[b] else None for b in range(n)]


def recent_rate(per_bucket: Sequence[int], bucket_seconds: float, last: int = 3) -> float:
    """Answers per hour over the last `last` complete-ish buckets (the current one included)."""
    if not per_bucket or bucket_seconds <= 0:
        return 0.0
    window = per_bucket[-last:]
    return sum(window) / (len(window) * bucket_seconds) * 3600.0


def projection(remaining: int, per_hour: float, now: float) -> float | None:
    """When the remaining assignments are in at the current rate (campaign clock), or None."""
    if remaining <= 0:
        return now
    if per_hour <= 0:
        return None
    return now + remaining / per_hour * 3600.0


def fraction(part: Decimal | int | float, whole: Decimal | int | float) -> float:
    return float(part) / float(whole) if whole else 0.0


@dataclass(frozen=True)
class ClockFix:
    """A point where wall time and campaign-clock time were both known, and the clock's speed."""

    wall: float
    clock: float
    speed: float

    def at(self, wall: float, running: bool) -> float:
        """The campaign clock at `wall`; a stopped daemon's clock does not move."""
        return self.clock + (max(wall - self.wall, 0.0) * self.speed if running else 0.0)


@dataclass(frozen=True)
class Liveness:
    live: bool
    last_seen: float | None  # wall time of the newest sign of life
    message: str


def liveness(now: float, signs: Iterable[float | None], threshold: float, finished: bool) -> Liveness:
    """Is a daemon working this campaign? Judged from the newest wall-clock write it left in the store."""
    known = [s for s in signs if s is not None]
    last = max(known) if known else None
    if finished:
        return Liveness(False, last, "finished: no daemon needed")
    if last is None:
        return Liveness(False, None, "no daemon has written to this store yet")
    age = max(now - last, 0.0)
    if age <= threshold:
        return Liveness(True, last, f"daemon live (last write {human_seconds(age)} ago)")
    return Liveness(False, last, f"NO DAEMON: nothing written for {human_seconds(age)}; figures are as of then")


def human_seconds(s: float | None) -> str:
    """Short durations: 45s, 12m, 3h05m, 2d04h."""
    if s is None:
        return "-"
    neg = s < 0
    s = abs(int(s))
    if s < 60:
        out = f"{s}s"
    elif s < 3600:
        out = f"{s // 60}m{s % 60:02d}s" if s < 600 else f"{s // 60}m"
    elif s < 86400:
        out = f"{s // 3600}h{s % 3600 // 60:02d}m"
    else:
        out = f"{s // 86400}d{s % 86400 // 3600:02d}h"
    return "-" + out if neg else out
