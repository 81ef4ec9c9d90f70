"""Planning: items into the store and HIT drafts for a stage, once, deterministically.

The stage's task kind groups the items (`TaskKind.plan`); batch-planned kinds are planned batch by
batch in `campaign.steps.batches` instead.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Iterator
from itertools import islice

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
    with _PLANNING, ctx.store.session() as s:
        items = read_input(ctx.campaign.input_kind, ctx.campaign.input_path)
        n = len(items)
        prolific = ctx.campaign.prolific is not None

        def rows() -> Iterator[ItemRow]:
            for it in items:
                yield ItemRow(campaign=ctx.name, item_key=it.key, text=it.text, doc=it.doc, position=it.position)
            for stage in ctx.campaign.stages:
                for j, text in enumerate(stage.traps.texts if stage.traps.share > 0 else ()):
                    if prolific:  # on Prolific a trap is a fair attention check: it says which answer to give
                        text = attention_text(stage.kind, text)
                    yield ItemRow(campaign=ctx.name, item_key=f"{TRAP_PREFIX}{stage.name}:{j}", text=text, position=n + j, is_trap=True)

        _insert(s, rows())
        ctx.store.event(ctx.name, "items_loaded", f"{n} items loaded from {ctx.campaign.input_path}", session=s)
        return n


# One campaign planned at a time in a daemon. Campaigns start together: at 470,000 propositions a daemon
# planned four of its campaigns at once on its pass threads, and their rows in memory together made its
# first minute its largest (280 MiB, where planning one campaign of 11,750 items peaks 45 MiB above the
# daemon's start). Planning is Python under the GIL: it gained little from running side by side.
_PLANNING = threading.Lock()
_CHUNK = 1000  # rows built, written and dropped at a time


def _insert(s: Session, rows: Iterable[SQLModel]) -> None:
    """New rows (of one table) in plain INSERTs of `_CHUNK` rows, with every field as the model fills it
    in: at 47,000 items and 9,400 drafts the ORM's row-by-row flush made the first pass the longest of a
    run, and a whole campaign's rows as models at once were 45 MiB of a daemon's peak."""
    it = iter(rows)
    while chunk := list(islice(it, _CHUNK)):
        table = type(chunk[0]).__table__  # type: ignore[attr-defined]
        s.connection().execute(insert(table), [r.model_dump(exclude={"id"}) for r in chunk])


def plan_stage(ctx: Context, stage: Stage) -> int:
    """Write the stage's HIT drafts unless they exist; returns how many drafts the stage has."""
    with ctx.store.session() as s:
        have = s.exec(select(func.count()).select_from(HitRow).where(HitRow.campaign == ctx.name, HitRow.stage == stage.name)).one()
        if have:
            return int(have)
    with _PLANNING, ctx.store.session() as s:
        rows = s.exec(select(ItemRow.item_key, ItemRow.doc, ItemRow.text, ItemRow.is_trap)  # plain columns, not models
                      .where(ItemRow.campaign == ctx.name).order_by(col(ItemRow.position))).all()
        traps = [key for key, _, _, is_trap in rows if is_trap and key.startswith(f"{TRAP_PREFIX}{stage.name}:")]
        items = [PlanItem(key=key, doc=doc, text=text) for key, doc, text, is_trap in rows if not is_trap]
        del rows
        drafts = get_kind(stage.kind).plan(stage, items, traps, ctx.seed)
        _insert(s, (HitRow(
            campaign=ctx.name, stage=stage.name, hit_key=d.hit_key, batch=d.batch,
            item_keys=json.dumps(list(d.item_keys)), annotation=ctx.annotation(stage.name, d.hit_key),
            token=ctx.token(d.hit_key, 0), reward=fmt(stage.reward), assignments=stage.assignments,
        ) for d in drafts))
        ctx.store.event(ctx.name, "planned", f"stage {stage.name}: {len(drafts)} HITs planned", session=s)
        return len(drafts)
