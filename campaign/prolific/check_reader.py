"""Counting a submission's attention checks from the store, for the Prolific adapter's verdicts: the one
I/O piece of the attention-check rules (`campaign.prolific.checks` holds the pure ones)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from campaign.prolific.checks import CheckCount

if TYPE_CHECKING:
    from campaign.spec import Campaign
    from campaign.store import Store


def store_checks(store: Store, campaign: Campaign) -> Callable[[Sequence[str]], CheckCount]:
    """assignment ids -> the attention checks among their answers and how many failed, by each stage's
    own pass rule (`TaskKind.evidence`), read from the store (where collect wrote the answers)."""
    from sqlmodel import col, select

    from campaign.store import AssignmentRow, JudgmentRow
    from campaign.tasks import get as get_kind
    from campaign.tasks.base import TRAP_PREFIX
    from campaign.tasks.kind import ReviewedJudgment

    def count(aids: Sequence[str]) -> CheckCount:
        if not aids:
            return CheckCount()
        with store.session() as s:
            rows = s.exec(select(col(JudgmentRow.stage), col(JudgmentRow.item_key), col(JudgmentRow.value),  # type: ignore[call-overload]
                                 col(JudgmentRow.worker_id), col(JudgmentRow.assignment_id), col(AssignmentRow.hit_key))
                          .join(AssignmentRow, col(AssignmentRow.assignment_id) == col(JudgmentRow.assignment_id))
                          .where(JudgmentRow.campaign == campaign.name, col(JudgmentRow.assignment_id).in_(list(aids)))).all()
        shown: dict[str, int] = {}
        for r in rows:
            shown[r[4]] = shown.get(r[4], 0) + 1
        by_stage: dict[str, list[ReviewedJudgment]] = {}
        for stage, item, value, worker, aid, hit_key in rows:
            if item.startswith(TRAP_PREFIX):
                by_stage.setdefault(stage, []).append(ReviewedJudgment(item_key=item, value=value, worker_id=worker,
                                                                       assignment_id=aid, hit_key=hit_key, shown=shown[aid]))
        seen = failed = 0
        for name, judged in by_stage.items():
            try:
                stage = campaign.stage(name)
            except (KeyError, ValueError, LookupError):
                continue
            found = get_kind(stage.kind).evidence(stage, judged)
            for t in (found[1] if found is not None else []):
                seen += 1
                failed += 0 if t.passed else 1
        return CheckCount(seen, failed)
    return count
