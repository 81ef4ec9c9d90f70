"""Alerts: the conditions an operator must not miss, computed from plain numbers (no store imports).

- budget: 80% and 100% of the budget committed (spent + reserved; the ledger never lets it go over);
- review falling behind: the oldest unreviewed answer will be approved by the marketplace on its own
  (after the auto-approval delay) within a quarter of that delay, or already was;
- agreement dropping sharply: the answers of the newest RECENT periods agree with the rest DROP less
  (worker-vs-rest r, weighted by answers) than the answers before them, each side with at least
  MIN_ANSWERS answers so one early spammer is not a trend;
- a burst of marketplace errors: BURST or more error events within BURST_WINDOW wall seconds;
- money not reconciled: a finished study whose ledger figure differs from what the service says it
  charged (`campaign.steps.studies.reconcile_costs`), standing until the figures agree.

Each alert has a stable `key`; `campaign.steps.alerts.raise_alerts` writes an event when a key appears
and writes again only after it has cleared, so a standing condition is one event, not one per tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from campaign.money import shown
from campaign.state import ACTIVE, DONE

DROP = 0.25
RECENT = 6
MIN_ANSWERS = 10
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
    answers: dict[str, Sequence[int]] = field(default_factory=dict)  # stage -> answers per period
    currency: str = "USD"
    error_times: Sequence[float] = ()  # wall times of marketplace/step error events
    wall_now: float = 0.0
    clock_speed: float = 1.0
    cost_mismatches: Sequence[tuple[str, dict[str, str]]] = ()  # (study key, {study, booked, charged})


def compute_alerts(x: AlertInput) -> list[Alert]:
    out: list[Alert] = []
    if x.budget > 0 and x.status not in DONE:
        share = x.committed / x.budget
        if share >= 1:
            out.append(Alert("budget100", "error", f"budget fully committed: {shown(x.committed, x.currency)} of {shown(x.budget, x.currency)} spent or reserved"))
        elif share >= Decimal("0.8"):
            out.append(Alert("budget80", "warning", f"{share:.0%} of the budget committed ({shown(x.committed, x.currency)} of {shown(x.budget, x.currency)})"))
    if x.status in ACTIVE:
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
        drop = agreement_drop(series, x.answers.get(stage, [1] * len(series)))
        if drop is not None:
            before, now = drop
            out.append(Alert(f"agreement_drop:{stage}", "warning",
                             f"{stage}: agreement dropped sharply (r {before:.2f} -> {now:.2f} in the newest answers)"))
    burst = error_burst(x.error_times, x.wall_now)
    if burst:
        out.append(Alert("market_errors", "error", f"{burst} marketplace or step errors in the last {BURST_WINDOW:.0f} s"))
    for key, figures in x.cost_mismatches:
        out.append(Alert(f"cost_mismatch:{key}", "error",
                         f"study {key} (Prolific {figures.get('study')}): the ledger booked "
                         f"{shown(Decimal(figures.get('booked') or 0), x.currency)}, the service charged "
                         f"{shown(Decimal(figures.get('charged') or 0), x.currency)}"))
    return out


def agreement_drop(series: Sequence[float | None], answers: Sequence[int]) -> tuple[float, float] | None:
    """(agreement before, agreement of the newest answers) when the newest RECENT periods' answers,
    pooled, agree DROP less than all earlier ones, both sides resting on MIN_ANSWERS answers or more."""
    def pooled(idx: range) -> tuple[float, int]:
        num, den = 0.0, 0
        for i in idx:
            v, n = series[i], answers[i] if i < len(answers) else 0
            if v is not None and n:
                num += v * n
                den += n
        return (num / den if den else 0.0), den

    cut = max(len(series) - RECENT, 0)
    before, n_before = pooled(range(0, cut))
    recent, n_recent = pooled(range(cut, len(series)))
    if n_before < MIN_ANSWERS or n_recent < MIN_ANSWERS:
        return None
    if before - recent >= DROP:
        return before, recent
    return None


def error_burst(times: Sequence[float], now: float) -> int:
    n = sum(1 for t in times if now - BURST_WINDOW <= t <= now + 1)
    return n if n >= BURST else 0


def _dur(s: float) -> str:
    from campaign.readmodel.series import human_seconds

    return human_seconds(s)
