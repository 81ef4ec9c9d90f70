"""Planning: items into the store and HIT drafts for a stage, once, deterministically.

The stage's task kind groups the items (`TaskKind.plan`); batch-planned kinds are planned batch by
batch in `campaign.steps.batches` instead.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from sqlalchemy import insert
from sqlmodel import Session, SQLModel, col, func, select

from campaign.inputs import load_items as read_input
from campaign.money import fmt
from campaign.prolific.checks import attention_text
from campaign.spec import Stage
from campaign.steps.context import Context
from campaign.store import HitRow, ItemRow
from campaign.tasks import get as get_kind
from campaign.tasks.base import TRAP_PREFIX
from campaign.tasks.kind import PlanItem

log = logging.getLogger(__name__)


def load_items(ctx: Context) -> int:
    """Copy the input's items (and the stage's trap sentences) into the store, once. On Prolific a trap
    sentence carries its explicit instruction (`campaign.prolific.checks.attention_text`)."""
    with ctx.store.session() as s:
        have = s.exec(select(func.count()).select_from(ItemRow).where(ItemRow.campaign == ctx.name)).one()
        if have:
            return int(have)
        items = read_input(ctx.campaign.input_kind, ctx.campaign.input_path)
        rows = [ItemRow(campaign=ctx.name, item_key=it.key, text=it.text, doc=it.doc, position=it.position) for it in items]
        n = len(items)
        prolific = ctx.campaign.prolific is not None
        for stage in ctx.campaign.stages:
            for j, text in enumerate(stage.traps.texts if stage.traps.share > 0 else ()):
                if prolific:  # on Prolific a trap is a fair attention check: it says which answer to give
                    text = attention_text(stage.kind, text)
                rows.append(ItemRow(campaign=ctx.name, item_key=f"{TRAP_PREFIX}{stage.name}:{j}", text=text, position=n + j, is_trap=True))
        _insert(s, rows)
        ctx.store.event(ctx.name, "items_loaded", f"{n} items loaded from {ctx.campaign.input_path}", session=s)
        return n


def _insert(s: Session, rows: Sequence[SQLModel]) -> None:
    """New rows (of one table) in one plain INSERT, with every field as the model fills it in: at 47,000
    items and 9,400 drafts the ORM's row-by-row flush made the first pass the longest of a run."""
    if rows:
        table = type(rows[0]).__table__  # type: ignore[attr-defined]
        s.connection().execute(insert(table), [r.model_dump(exclude={"id"}) for r in rows])


def plan_stage(ctx: Context, stage: Stage) -> int:
    """Write the stage's HIT drafts unless they exist; returns how many drafts the stage has."""
    with ctx.store.session() as s:
        have = s.exec(select(func.count()).select_from(HitRow).where(HitRow.campaign == ctx.name, HitRow.stage == stage.name)).one()
        if have:
            return int(have)
        rows = s.exec(select(ItemRow).where(ItemRow.campaign == ctx.name).order_by(col(ItemRow.position))).all()
        traps = [r.item_key for r in rows if r.is_trap and r.item_key.startswith(f"{TRAP_PREFIX}{stage.name}:")]
        items = [PlanItem(key=r.item_key, doc=r.doc, text=r.text) for r in rows if not r.is_trap]
        drafts = get_kind(stage.kind).plan(stage, items, traps, ctx.seed)
        _insert(s, [HitRow(
            campaign=ctx.name, stage=stage.name, hit_key=d.hit_key, batch=d.batch,
            item_keys=json.dumps(list(d.item_keys)), annotation=ctx.annotation(stage.name, d.hit_key),
            token=ctx.token(d.hit_key, 0), reward=fmt(stage.reward), assignments=stage.assignments,
        ) for d in drafts])
        ctx.store.event(ctx.name, "planned", f"stage {stage.name}: {len(drafts)} HITs planned", session=s)
        return len(drafts)
