"""Batch-planned stages (ranking): candidates fixed once, then batches planned from earlier answers.

Each batch is planned only when the previous one is fully decided: the stage's task kind gets every
counted answer in a fixed order (so a restart, or a second run with the same seed, plans the same
batch) and returns the next HITs, which are written as drafts in one transaction with the kind's
state. A crash between batches replans the same batch; a crash inside one resumes its drafts. The
stage is complete when the kind says so and every HIT is closed.
"""

from __future__ import annotations

import json
import logging

from sqlmodel import col, func, select

from campaign.money import fmt
from campaign.spec import Stage
from campaign.state import Keys
from campaign.steps.context import Context
from campaign.steps.stages import OPEN
from campaign.store import HitRow, KVRow
from campaign.tasks import get as get_kind
from campaign.tasks.kind import BatchInput, answers_by_assignment

log = logging.getLogger(__name__)


def stage_complete(ctx: Context, stage: Stage) -> bool:
    return ctx.store.get_kv(ctx.name, Keys.stage_complete(stage.name)) == "1"


def candidates(ctx: Context, stage: Stage) -> list[str]:
    """The stage's items, chosen by its kind when the stage starts and stored: later quality-control
    changes to an earlier stage cannot reshuffle a running stage."""
    saved = ctx.store.get_kv(ctx.name, Keys.shortlist(stage.name))
    if saved is not None:
        return list(json.loads(saved))
    chosen = get_kind(stage.kind).candidates(stage, ctx.data)
    ctx.store.set_kv(ctx.name, Keys.shortlist(stage.name), json.dumps(chosen))
    ctx.store.event(ctx.name, "shortlist", f"stage {stage.name}: {len(chosen)} items shortlisted")
    return chosen


def plan_next_batch(ctx: Context, stage: Stage) -> int:
    """Plan the next batch if the previous one is done; returns the number of HITs planned (0 if none)."""
    if stage_complete(ctx, stage):
        return 0
    with ctx.store.session() as s:
        open_hits = s.exec(select(func.count()).select_from(HitRow).where(
            HitRow.campaign == ctx.name, HitRow.stage == stage.name, col(HitRow.status).in_(OPEN))).one()
        last = s.exec(select(func.max(HitRow.batch)).where(HitRow.campaign == ctx.name, HitRow.stage == stage.name)).one()
    if open_hits:
        return 0
    kind = get_kind(stage.kind)
    batch = 0 if last is None else int(last) + 1
    saved = ctx.store.get_kv(ctx.name, Keys.batch_state(stage.name))
    inp = BatchInput(campaign=ctx.name, items=candidates(ctx, stage),
                     answers=answers_by_assignment(ctx.data.counted(stage.name)),
                     state=json.loads(saved) if saved is not None else None, batch=batch, seed=ctx.seed)
    plan = kind.plan_batch(stage, inp)
    if plan.progress is not None and batch > 0:
        ctx.store.set_kv(ctx.name, Keys.batch_progress(kind.name, stage.name, batch - 1), json.dumps(plan.progress))
    if plan.stop is not None or not plan.groups:
        ctx.store.set_kv(ctx.name, Keys.stage_complete(stage.name), "1")
        if plan.stop:
            ctx.store.event(ctx.name, "stage_complete", f"stage {stage.name}: {plan.stop}", level=plan.stop_level)
        return 0
    with ctx.store.session() as s:
        for k, group in enumerate(plan.groups):
            hit_key = f"{stage.name}-b{batch:03d}-{k:04d}"
            s.add(HitRow(campaign=ctx.name, stage=stage.name, hit_key=hit_key, batch=batch, item_keys=json.dumps(list(group)),
                         annotation=ctx.annotation(stage.name, hit_key), token=ctx.token(hit_key, 0), reward=fmt(stage.reward),
                         assignments=stage.assignments))
        value = json.dumps(plan.state)
        row = s.exec(select(KVRow).where(KVRow.campaign == ctx.name, KVRow.key == Keys.batch_state(stage.name))).first()
        if row is None:
            s.add(KVRow(campaign=ctx.name, key=Keys.batch_state(stage.name), value=value))
        else:
            row.value = value
            s.add(row)
        ctx.store.event(ctx.name, "batch_planned", f"stage {stage.name} batch {batch}: {plan.note} in {len(plan.groups)} HITs",
                        session=s)
    return len(plan.groups)
