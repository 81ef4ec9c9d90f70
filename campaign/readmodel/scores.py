"""Scores from the store: the one query for judgments that count (approved, not excluded by quality
control), per-stage summaries through the stage's task kind, and byte-stable atomic exports.

Scores are recomputed from the store each time (never updated incrementally), so a restart cannot
double-count, and the export is sorted and formatted deterministically so that two runs with the same
spec and seed write identical files.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sqlmodel import col, select

from campaign import tasks
from campaign.metrics.reliability import REPEAT_PREFIX
from campaign.outfile import atomic_write
from campaign.spec import Campaign
from campaign.state import AssignmentStatus, Keys
from campaign.store import AssignmentRow, ItemRow, JudgmentRow, Store
from campaign.tasks.base import TRAP_PREFIX
from campaign.tasks.kind import EXPORT_COLUMNS, CountedJudgment


def _counted(query: Any, campaign: str, stage: str) -> Any:
    """`query` over the judgments joined to their assignments, kept to the ones that count: approved,
    not excluded by quality control, not from a repeat HIT (those only measure reliability)."""
    return (query.join(AssignmentRow, col(AssignmentRow.assignment_id) == col(JudgmentRow.assignment_id))
            .where(JudgmentRow.campaign == campaign, JudgmentRow.stage == stage, col(JudgmentRow.excluded) == False,  # noqa: E712
                   AssignmentRow.status == AssignmentStatus.APPROVED, ~col(AssignmentRow.hit_key).startswith(REPEAT_PREFIX)))


def counted_values(store: Store, campaign: str, stage: str) -> dict[str, list[float]]:
    """The counted labels' values by item, traps left out: all a stage's scores need (`compute_scores`).

    A campaign's export reads its whole last stage, and the daemon's arenas that fill meanwhile stay held
    by whatever long-lived object lands among them: reading the judgments whole for the values alone
    (an object with five ids and a mapping a label) took 14.4 MiB at 58,750 labels, this 3.7. No order is
    asked for: every kind's `aggregate` sorts an item's values before it sums them."""
    by_item: dict[str, list[float]] = {}
    with store.session() as s:
        rows = s.connection().execute(_counted(select(col(JudgmentRow.item_key), col(JudgmentRow.value)),
                                               campaign, stage))
        for item, value in rows:
            values = by_item.get(item)
            if values is None:
                if item.startswith(TRAP_PREFIX):
                    continue
                values = by_item[item] = []
            values.append(value)
    return by_item


def counted_judgments(store: Store, campaign: str, stage: str) -> list[CountedJudgment]:
    """Judgments of approved assignments that quality control did not exclude, by item then assignment;
    a stage's repeat HITs (`campaign.steps.repeat`) only measure reliability and never count."""
    # An export reads a whole stage at once, and what it builds stays in the daemon's memory only while
    # it runs, but the arenas it fills stay held by whatever long-lived object lands among them: so the
    # rows are taken one at a time (not all fetched as row objects first), each repeated id is kept once
    # (an item's, an assignment's, a worker's and a HIT's ids come again on every label), and a label
    # without extra figures shares one empty mapping. At 58,750 labels: ~50 -> ~20 MiB at its peak.
    same: dict[str, str] = {}
    out: list[CountedJudgment] = []
    with store.session() as s:
        # plain columns (as ORM objects the 235,000 labels of 47,000 assignments took 430 MB), through the
        # connection: the ORM's execute fetches every row as a row object before giving the first
        rows = s.connection().execute(_counted(
            select(col(JudgmentRow.item_key), col(JudgmentRow.value), col(JudgmentRow.extra),  # type: ignore[call-overload]
                   col(JudgmentRow.assignment_id), col(JudgmentRow.worker_id), col(AssignmentRow.hit_key)), campaign, stage)
            .order_by(col(JudgmentRow.item_key), col(JudgmentRow.assignment_id))
        )
        for item, value, extra, aid, worker, hit_key in rows:
            out.append(CountedJudgment(item_key=same.setdefault(item, item), value=value,
                                       extra=json.loads(extra) if extra else NO_EXTRA,
                                       assignment_id=same.setdefault(aid, aid), worker_id=same.setdefault(worker, worker),
                                       hit_key=same.setdefault(hit_key, hit_key)))
    return out


NO_EXTRA: Mapping[str, Any] = MappingProxyType({})  # the extra figures of a label that has none (read-only: shared)


def item_texts(store: Store, campaign: str) -> dict[str, str]:
    with store.session() as s:
        return dict(s.exec(select(ItemRow.item_key, ItemRow.text).where(ItemRow.campaign == campaign)).all())


def compute_scores(store: Store, campaign: str, stage_name: str, kind: str) -> list[dict]:
    """One stage's per-item summary from its counted judgments (traps never scored), each with its text."""
    scores = tasks.get(kind).aggregate(counted_values(store, campaign, stage_name))
    texts = item_texts(store, campaign)
    for r in scores:
        r["text"] = texts.get(r["item"], "")
    return scores


class StoreStageData:
    """`campaign.tasks.kind.StageData` read from the store."""

    def __init__(self, store: Store, campaign: Campaign, seed: int) -> None:
        self.store = store
        self._campaign = campaign
        self._seed = seed

    @property
    def campaign(self) -> Campaign:
        return self._campaign

    @property
    def seed(self) -> int:
        return self._seed

    def counted(self, stage: str) -> list[CountedJudgment]:
        return counted_judgments(self.store, self._campaign.name, stage)

    def texts(self) -> dict[str, str]:
        return item_texts(self.store, self._campaign.name)

    def items(self) -> list[str]:
        with self.store.session() as s:
            return list(s.exec(select(ItemRow.item_key).where(ItemRow.campaign == self._campaign.name,
                                                              col(ItemRow.is_trap) == False)  # noqa: E712
                               .order_by(col(ItemRow.position))).all())

    def scores(self, stage: str) -> list[dict]:
        return compute_scores(self.store, self._campaign.name, stage, self._campaign.stage(stage).kind)

    def candidates(self, stage: str) -> list[str]:
        saved = self.store.get_kv(self._campaign.name, Keys.shortlist(stage))
        return list(json.loads(saved)) if saved is not None else []

    def agreement(self, stage: str) -> dict[str, float]:
        saved = self.store.get_kv(self._campaign.name, Keys.review(stage))
        evidence = json.loads(saved).get("evidence", {}) if saved is not None else {}
        return {w: float(e["correlation"]) for w, e in evidence.items() if e.get("correlation") is not None}


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6f}"
    return str(value)


def scores_csv(scores: list[dict], columns: tuple[str, ...] = EXPORT_COLUMNS) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in scores:
        w.writerow([_cell(r.get(c)) for c in columns])
    return buf.getvalue()


def scores_jsonl(scores: list[dict], columns: tuple[str, ...] = EXPORT_COLUMNS) -> str:
    return "".join(json.dumps({k: r.get(k) for k in columns}, ensure_ascii=False) + "\n" for r in scores)


def write_scores(out_dir: Path, scores: list[dict], columns: tuple[str, ...] = EXPORT_COLUMNS) -> tuple[Path, Path]:
    csv_path, jsonl_path = out_dir / "scores.csv", out_dir / "scores.jsonl"
    atomic_write(csv_path, scores_csv(scores, columns))
    atomic_write(jsonl_path, scores_jsonl(scores, columns))
    return csv_path, jsonl_path
