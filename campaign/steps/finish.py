"""Aggregating and exporting: scores from every counted judgment, written atomically, byte-stable.

Scores are recomputed from the store each time (never updated incrementally), so a restart cannot
double-count, and the export is sorted and formatted deterministically so that two runs with the same
spec and seed write identical files.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from sqlmodel import func, select

from campaign.steps.context import Context
from campaign.store import AssignmentRow, CampaignRow, HitRow, ItemRow, JudgmentRow
from campaign.tasks import kind_module
from campaign.tasks.base import TRAP_PREFIX

EXPORT_COLUMNS = ("rank", "item", "score", "n", "sd", "text")
RANKING_COLUMNS = ("rank", "item", "score", "uncertainty", "comparisons", "wins", "kept",
                   "likert_score", "likert_n", "likert_sd", "text")


def compute_scores(store, campaign: str, stage_name: str, kind: str) -> list[dict]:
    """Scores of one stage from judgments of approved assignments that quality control did not exclude."""
    with store.session() as s:
        rows = s.exec(
            select(JudgmentRow.item_key, JudgmentRow.value)
            .join(AssignmentRow, AssignmentRow.assignment_id == JudgmentRow.assignment_id)
            .where(JudgmentRow.campaign == campaign, JudgmentRow.stage == stage_name, JudgmentRow.excluded == False,  # noqa: E712
                   AssignmentRow.status == "approved")
            .order_by(JudgmentRow.item_key, JudgmentRow.assignment_id)
        ).all()
        texts = dict(s.exec(select(ItemRow.item_key, ItemRow.text).where(ItemRow.campaign == campaign)).all())
    by_item: dict[str, list[float]] = {}
    for key, value in rows:
        if key.startswith(TRAP_PREFIX):
            continue  # traps check workers; they are never scored
        by_item.setdefault(key, []).append(value)
    scores = kind_module(kind).aggregate(by_item)
    for r in scores:
        r["text"] = texts.get(r["item"], "")
    return scores


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
    _atomic_write(csv_path, scores_csv(scores, columns))
    _atomic_write(jsonl_path, scores_jsonl(scores, columns))
    return csv_path, jsonl_path



def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def stage_done(ctx: Context, stage_name: str) -> bool:
    with ctx.store.session() as s:
        n_hits = s.exec(select(func.count()).select_from(HitRow).where(HitRow.campaign == ctx.name, HitRow.stage == stage_name)).one()
        open_hits = s.exec(select(func.count()).select_from(HitRow).where(
            HitRow.campaign == ctx.name, HitRow.stage == stage_name,
            HitRow.status.in_(("draft", "posting", "posted")))).one()
    if ctx.campaign.stage(stage_name).kind == "ranking":
        return open_hits == 0 and ctx.store.get_kv(ctx.name, f"stage_complete:{stage_name}") == "1"
    return n_hits > 0 and open_hits == 0


def finish_if_done(ctx: Context) -> bool:
    """When every stage is done, write the scores and mark the campaign finished."""
    with ctx.store.session() as s:
        camp = s.get(CampaignRow, ctx.name)
        if camp.status == "finished":
            return True
    if not all(stage_done(ctx, st.name) for st in ctx.campaign.stages):
        return False
    last = ctx.campaign.stages[-1]
    if last.kind == "ranking":
        from campaign.steps.ranking_export import ranking_scores

        scores = ranking_scores(ctx, last)
        columns = RANKING_COLUMNS
    else:
        scores = compute_scores(ctx.store, ctx.name, last.name, last.kind)
        columns = EXPORT_COLUMNS
    csv_path, _ = write_scores(ctx.out_dir(), scores, columns)
    extra = ""
    if last.kind == "nuggets":
        from campaign.steps.nugget_export import nugget_gold, write_gold

        gold, competence = nugget_gold(ctx, last)
        write_gold(ctx.out_dir(), gold)
        extra = f"; {len(gold)} gold nuggets"
        _record_competence(ctx, competence)
    with ctx.store.session() as s:
        camp = s.get(CampaignRow, ctx.name)
        camp.status = "finished"
        camp.finished_at = ctx.clock.now()
        s.add(camp)
        ctx.store.event(ctx.name, "finished", f"{len(scores)} items scored{extra}; written to {csv_path}", session=s)
    return True


def _record_competence(ctx: Context, competence: dict[str, float]) -> None:
    """MACE competence joins the other evidence shown by `campaign workers`."""
    from campaign.store import WorkerRow

    with ctx.store.session() as s:
        for w in s.exec(select(WorkerRow).where(WorkerRow.campaign == ctx.name)).all():
            if w.worker_id in competence:
                ev = json.loads(w.evidence) if w.evidence else {}
                ev["competence"] = round(competence[w.worker_id], 4)
                w.evidence = json.dumps(ev, sort_keys=True)
                s.add(w)
