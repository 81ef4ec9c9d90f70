"""Work time and effective hourly pay per stage: the figures a researcher (and an ethics board) asks for.

Work time is the marketplace's own accept-to-submit time of each valid, approved assignment. The hourly
pay follows Prolific's definition: the stage's reward per assignment divided by its *median* work time,
so a few workers who leave a HIT open for an hour do not hide what a typical worker earned. Bonuses are
paid per worker, not per stage, and are left out. One function, read by `campaign status`, the dashboard
and the report, so the three show the same figure.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from sqlmodel import Session, select

from campaign.state import AssignmentStatus
from campaign.store import AssignmentRow, HitRow


def stage_pay(rows: Iterable[tuple[str, float | None, float | None, str]]) -> dict[str, dict[str, Any]]:
    """Per stage, from (stage, accept_time, submit_time, reward) of approved assignments:
    `median_work_seconds` (None without timed work), `hourly_pay` (Decimal cents, None likewise) and
    `timed` (how many assignments had both times)."""
    seconds: dict[str, list[float]] = defaultdict(list)
    rewards: dict[str, list[Decimal]] = defaultdict(list)
    for stage, accepted, submitted, reward in rows:
        rewards[stage].append(Decimal(reward))
        if accepted is not None and submitted is not None and submitted >= accepted:
            seconds[stage].append(submitted - accepted)
    out: dict[str, dict[str, Any]] = {}
    for stage in rewards:
        times = seconds.get(stage, [])
        median = statistics.median(times) if times else None
        paid = sorted(rewards[stage])[len(rewards[stage]) // 2]  # the stage's reward (uniform in practice)
        hourly = (paid * Decimal(3600) / Decimal(str(median))).quantize(Decimal("0.01"), ROUND_HALF_UP) if median else None
        out[stage] = {"median_work_seconds": None if median is None else round(median, 1), "hourly_pay": hourly,
                      "timed": len(times)}
    return out


def read_stage_pay(session: Session, campaign: str) -> dict[str, dict[str, Any]]:
    """`stage_pay` over the campaign's approved, valid assignments, read from the store."""
    rows = session.exec(select(AssignmentRow.stage, AssignmentRow.accept_time, AssignmentRow.submit_time, HitRow.reward)
                        .join(HitRow, (HitRow.campaign == AssignmentRow.campaign) & (HitRow.hit_key == AssignmentRow.hit_key))  # type: ignore[arg-type]
                        .where(AssignmentRow.campaign == campaign, AssignmentRow.status == AssignmentStatus.APPROVED,
                               AssignmentRow.valid == True)).all()  # noqa: E712
    return stage_pay(rows)


def work_time_text(seconds: float | None) -> str:
    """'2 min 05 s' style, for a median work time; '' when there is none."""
    if seconds is None:
        return ""
    whole = int(round(seconds))
    return f"{whole // 60} min {whole % 60:02d} s" if whole >= 60 else f"{whole} s"
