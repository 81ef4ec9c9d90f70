"""Where each stage of a campaign stands, from the store: waiting for the stage before it, under way,
or done. A stage starts when the one before it is done; a batch-planned stage is done when its kind
has said so (`Keys.stage_complete`) and every HIT is closed, any other stage when it has HITs and
none is open."""

from __future__ import annotations

from collections.abc import Iterator

from sqlmodel import col, func, select

from campaign.spec import Stage
from campaign.state import HitStatus, Keys
from campaign.steps.context import Context
from campaign.steps.repeat import repeat_settled
from campaign.store import HitRow
from campaign.tasks import get as get_kind

OPEN = (HitStatus.DRAFT, HitStatus.POSTING, HitStatus.POSTED)


def stage_done(ctx: Context, stage_name: str) -> bool:
    if not repeat_settled(ctx, ctx.campaign.stage(stage_name)):
        return False
    with ctx.store.session() as s:
        n_hits = s.exec(select(func.count()).select_from(HitRow).where(HitRow.campaign == ctx.name, HitRow.stage == stage_name)).one()
        open_hits = s.exec(select(func.count()).select_from(HitRow).where(
            HitRow.campaign == ctx.name, HitRow.stage == stage_name, col(HitRow.status).in_(OPEN))).one()
    if get_kind(ctx.campaign.stage(stage_name).kind).batch_planned:
        return open_hits == 0 and ctx.store.get_kv(ctx.name, Keys.stage_complete(stage_name)) == "1"
    return n_hits > 0 and open_hits == 0


def all_done(ctx: Context) -> bool:
    return all(stage_done(ctx, s.name) for s in ctx.campaign.stages)


def ready_stages(ctx: Context) -> Iterator[Stage]:
    """The stages that may run now, in order; checked lazily, so a stage that a step just finished
    lets the next one start within the same pass."""
    for i, stage in enumerate(ctx.campaign.stages):
        if i > 0 and not stage_done(ctx, ctx.campaign.stages[i - 1].name):
            return
        yield stage
