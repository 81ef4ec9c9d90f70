"""Held rows as the operator sees them (read side): what a step failed on and quarantined, why, and
what became of it. `campaign held`, `campaign status`, `campaign workers`, the dashboard and the report
all read them here; the pipeline writes them (`campaign.steps.isolation`, `campaign.steps.settle`)."""

from __future__ import annotations

import json
from typing import Any

from sqlmodel import Session, col, func, select

from campaign.state import HeldStatus
from campaign.store import HeldRow, Store


def as_dict(r: HeldRow) -> dict[str, Any]:
    """One held row, strict-JSON ready (strings, numbers, booleans, None)."""
    return {"campaign": r.campaign, "row": r.row_key, "kind": r.row_kind, "step": r.step, "reason": r.error,
            "hit": r.hit_key, "worker": r.worker_id, "held_at": r.held_at, "status": r.status,
            "decision": r.decision, "message": r.message, "decided_at": r.decided_at, "settled_at": r.settled_at,
            "outcome": r.outcome, "data": json.loads(r.data) if r.data else None}


def held_rows(store: Store, campaign: str | None = None, *, include_settled: bool = False,
              limit: int | None = None) -> list[dict[str, Any]]:
    """Held rows, oldest first: the unsettled ones, or every one with `include_settled`."""
    with store.session() as s:
        q = select(HeldRow)
        if campaign is not None:
            q = q.where(HeldRow.campaign == campaign)
        if not include_settled:
            q = q.where(HeldRow.status == HeldStatus.HELD)
        q = q.order_by(col(HeldRow.campaign), col(HeldRow.held_at), col(HeldRow.id))
        if limit is not None:
            q = q.limit(limit)
        return [as_dict(r) for r in s.exec(q).all()]


def held_counts(s: Session, campaign: str) -> dict[str, int]:
    """How many rows are held (`open`), of which the operator decided and the daemon has not yet
    carried out (`waiting`), and how many were settled."""
    counts = {"open": 0, "waiting": 0, "settled": 0}
    for status, decided, n in s.exec(select(HeldRow.status, col(HeldRow.decision).is_not(None), func.count())
                                     .where(HeldRow.campaign == campaign)
                                     .group_by(col(HeldRow.status), col(HeldRow.decision).is_not(None))).all():
        if status == HeldStatus.HELD:
            counts["open"] += int(n)
            if decided:
                counts["waiting"] += int(n)
        else:
            counts["settled"] += int(n)
    return counts


def held_by_worker(s: Session, campaign: str) -> dict[str, int]:
    """Unsettled held rows per worker (assignments and bonuses)."""
    return {w: int(n) for w, n in s.exec(select(HeldRow.worker_id, func.count()).where(
        HeldRow.campaign == campaign, HeldRow.status == HeldStatus.HELD, col(HeldRow.worker_id).is_not(None))
        .group_by(col(HeldRow.worker_id))).all() if w is not None}
