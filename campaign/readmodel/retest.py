"""Test-retest figures of the stages that repeat part of their work (`repeat:` in the spec): the
correlation between the first pass and the repeat, over the judgments that count (approved, not
excluded), traps left out. The repeat HITs are planned by `campaign.steps.repeat`."""

from __future__ import annotations

import json

from sqlmodel import col, select

from campaign.metrics.reliability import REPEAT_PREFIX, Retest, is_repeat, retest_correlation
from campaign.state import AssignmentStatus
from campaign.store import AssignmentRow, HitRow, JudgmentRow, Store
from campaign.tasks.base import TRAP_PREFIX


def stage_retest(store: Store, campaign: str, stage: str) -> Retest | None:
    """The stage's test-retest figures from the judgments that count (approved, not excluded), traps left
    out; None when the stage has no repeat HIT."""
    with store.session() as s:
        has_repeat = s.exec(select(HitRow.id).where(HitRow.campaign == campaign, HitRow.stage == stage,
                                                    col(HitRow.hit_key).startswith(REPEAT_PREFIX))).first() is not None
        if not has_repeat:
            return None
        rows = s.exec(
            select(JudgmentRow.item_key, JudgmentRow.value, AssignmentRow.hit_key)
            .join(AssignmentRow, col(AssignmentRow.assignment_id) == col(JudgmentRow.assignment_id))
            .where(JudgmentRow.campaign == campaign, JudgmentRow.stage == stage, col(JudgmentRow.excluded) == False,  # noqa: E712
                   AssignmentRow.status == AssignmentStatus.APPROVED)).all()
    first = [(item, value) for item, value, hk in rows if not is_repeat(hk) and not item.startswith(TRAP_PREFIX)]
    again = [(item, value) for item, value, hk in rows if is_repeat(hk) and not item.startswith(TRAP_PREFIX)]
    return retest_correlation(first, again)


def retest_figures(store: Store, campaign: str, spec_json: str) -> dict[str, dict[str, float | int | None]]:
    """`{stage: {"items", "pearson", "spearman"}}` for every stage whose spec asks for a repeat (items 0
    and no correlation until the repeat has answers)."""
    out: dict[str, dict[str, float | int | None]] = {}
    for st in json.loads(spec_json).get("stages", []):
        if not isinstance(st, dict) or not float((st.get("repeat") or {}).get("share") or 0) > 0:
            continue
        r = stage_retest(store, campaign, str(st["name"]))
        out[str(st["name"])] = (r or Retest(0, None, None)).as_dict()
    return out
