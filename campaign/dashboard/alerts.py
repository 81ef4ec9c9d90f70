"""Alerts: the conditions an operator must not miss, computed from plain numbers (no store imports).

- budget: 80% and 100% of the budget committed (spent + reserved; the ledger never lets it go over);
- review falling behind: the oldest unreviewed answer will be approved by the marketplace on its own
  (after the auto-approval delay) within a quarter of that delay, or already was;
- agreement dropping sharply: the newest period's worker-vs-rest agreement is DROP below the median
  of the periods before it;
- a burst of marketplace errors: BURST or more error events within BURST_WINDOW wall seconds.

Each alert has a stable `key`; `campaign.steps.alerts.raise_alerts` writes an event when a key appears
and writes again only after it has cleared, so a standing condition is one event, not one per tick.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

DROP = 0.25
MIN_HISTORY = 4
BURST = 5
BURST_WINDOW = 60.0
REVIEW_MARGIN = 0.25


@dataclass(frozen=True)
class Alert:
    key: str
    level: str  # warning | error
    message: str


@dataclass(frozen=True)
class AlertInput:
    campaign: str
    status: str
    budget: Decimal
    committed: Decimal
    review_deadlines: Sequence[tuple[str, float | None, float]] = ()  # stage, earliest auto-approval (clock), delay
    clock_now: float = 0.0
    agreement: dict[str, Sequence[float | None]] = field(default_factory=dict)  # stage -> per-period series
    error_times: Sequence[float] = ()  # wall times of marketplace/step error events
    wall_now: float = 0.0
    clock_speed: float = 1.0


def compute_alerts(x: AlertInput) -> list[Alert]:
    out: list[Alert] = []
    if x.budget > 0:
        share = x.committed / x.budget
        if share >= 1:
            out.append(Alert("budget100", "error", f"budget fully committed: ${x.committed} of ${x.budget} spent or reserved"))
        elif share >= Decimal("0.8"):
            out.append(Alert("budget80", "warning", f"{share:.0%} of the budget committed (${x.committed} of ${x.budget})"))
    if x.status in ("running", "paused", "cancelling"):
        for stage, due, delay in x.review_deadlines:
            if due is None or delay <= 0:
                continue
            left = due - x.clock_now
            if left <= 0:
                out.append(Alert(f"review_late:{stage}", "error",
                                 f"{stage}: an answer passed its auto-approval time unreviewed (the marketplace approves it)"))
            elif left < REVIEW_MARGIN * delay:
                out.append(Alert(f"review_behind:{stage}", "warning",
                                 f"{stage}: review is falling behind; the oldest answer is auto-approved in {_dur(left)}"))
    for stage, series in x.agreement.items():
        drop = agreement_drop(series)
        if drop is not None:
            before, now = drop
            out.append(Alert(f"agreement_drop:{stage}", "warning",
                             f"{stage}: agreement dropped sharply (r {before:.2f} -> {now:.2f} in the newest answers)"))
    burst = error_burst(x.error_times, x.wall_now)
    if burst:
        out.append(Alert("market_errors", "error", f"{burst} marketplace or step errors in the last {BURST_WINDOW:.0f} s"))
    return out


def agreement_drop(series: Sequence[float | None]) -> tuple[float, float] | None:
    """(median before, newest) when the newest known value is DROP below the median of the earlier ones."""
    known = [v for v in series if v is not None]
    if len(known) < MIN_HISTORY + 1:
        return None
    before = statistics.median(known[:-1])
    if before - known[-1] >= DROP:
        return before, known[-1]
    return None


def error_burst(times: Sequence[float], now: float) -> int:
    n = sum(1 for t in times if now - BURST_WINDOW <= t <= now + 1)
    return n if n >= BURST else 0


def _dur(s: float) -> str:
    from campaign.dashboard.series import human_seconds

    return human_seconds(s)
