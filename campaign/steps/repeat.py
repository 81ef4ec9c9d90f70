"""Repeating a share of a stage's HITs with other workers, for its test-retest reliability (seed 000 §4).

Once the stage's first pass is over (every first-pass HIT closed; for a batch-planned kind, the kind
has also said the stage is complete), a seeded random share of its closed HITs (`repeat: {share: ...}`)
gets a twin: the same items in the same order, the same reward and number of assignments, keyed
`repeat:<hit key>`. The twins are ordinary drafts of the same stage, so posting (reserve, token,
annotation), collecting, quality control, reviewing, the ledger and crash recovery treat them like any
other HIT. Two things differ:

- Each twin's HIT type shuts out the workers who did the original: a worker group (on MTurk a requester
  qualification type, granted to those workers, required `DoesNotExist`; `marketplaces.base.WorkerGroups`)
  made and filled before the twin's draft is written, its id stored with the draft in one transaction.
  A crash in between redoes the idempotent calls; the group is found again by its name.
- Their judgments never count in the stage's scores (`readmodel.scores.counted_judgments` leaves out
  `repeat:` HITs); they are evidence for quality control like any answer, and the per-item means of both
  passes give the stage's test-retest correlation (`readmodel.retest.stage_retest`).

The stage is done (and the next stage starts) only when the repeat has been planned and its HITs are
closed too (`steps.stages.stage_done`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sqlmodel import col, select

from campaign.crash import crash_point
from campaign.marketplaces.base import MarketError, WorkerGroups
from campaign.metrics.reliability import is_repeat, repeat_key, sample_hits
from campaign.spec import Stage
from campaign.state import HitStatus, Keys, RepeatState
from campaign.store import AssignmentRow, HitRow
from campaign.tasks import get as get_kind

if TYPE_CHECKING:
    from campaign.steps.context import Context

log = logging.getLogger(__name__)

OPEN = (HitStatus.DRAFT, HitStatus.POSTING, HitStatus.POSTED)
PLANNED, SKIPPED = RepeatState.PLANNED, RepeatState.SKIPPED


def repeat_settled(ctx: Context, stage: Stage) -> bool:
    """False while a stage that asks for a repeat has not planned it yet (its HITs then keep it open)."""
    return stage.repeat.share <= 0 or ctx.store.get_kv(ctx.name, Keys.repeat(stage.name)) is not None


def _first_pass(ctx: Context, stage: Stage) -> list[HitRow]:
    with ctx.store.session() as s:
        rows = s.exec(select(HitRow).where(HitRow.campaign == ctx.name, HitRow.stage == stage.name)
                      .order_by(col(HitRow.id))).all()
    return [h for h in rows if not is_repeat(h.hit_key)]


def first_pass_done(ctx: Context, stage: Stage) -> bool:
    hits = _first_pass(ctx, stage)
    if not hits or any(h.status in OPEN for h in hits):
        return False
    if get_kind(stage.kind).batch_planned:  # the kind's own "complete" mark
        return ctx.store.get_kv(ctx.name, Keys.stage_complete(stage.name)) == "1"
    return True


def group_name(ctx: Context, hit_key: str) -> str:
    """Unique per requester (MTurk requires it) and per campaign instance, readable in the requester UI."""
    return f"campaign {ctx.name} {ctx.instance[:8]} {hit_key} workers"


def plan_repeat(ctx: Context, stage: Stage) -> int:
    """The repeat step: after the first pass, write the twins of the sampled HITs (once); returns how many
    twins this call wrote. A marketplace error leaves the rest for the next pass."""
    if stage.repeat.share <= 0 or ctx.store.get_kv(ctx.name, Keys.repeat(stage.name)) is not None:
        return 0
    if not first_pass_done(ctx, stage):
        return 0
    market = ctx.market
    if not isinstance(market, WorkerGroups):
        ctx.store.set_kv(ctx.name, Keys.repeat(stage.name), SKIPPED)
        ctx.store.event(ctx.name, "repeat_skipped", f"stage {stage.name}: marketplace {market.name} cannot keep a HIT's "
                        "workers out of its repeat; no test-retest measurement", level="error")
        return 0
    originals = {h.hit_key: h for h in _first_pass(ctx, stage) if h.status == HitStatus.CLOSED}
    chosen = sample_hits(originals, stage.repeat.share, ctx.seed, stage.name)
    made = 0
    for key in chosen:
        twin = repeat_key(key)
        with ctx.store.session() as s:
            if s.exec(select(HitRow.id).where(HitRow.campaign == ctx.name, HitRow.hit_key == twin)).first() is not None:
                continue
            workers = sorted(set(s.exec(select(AssignmentRow.worker_id).where(
                AssignmentRow.campaign == ctx.name, AssignmentRow.hit_key == key)).all()))
        try:
            gid = market.worker_group(group_name(ctx, key))
            for w in workers:
                market.add_to_group(gid, w)
        except MarketError as exc:
            ctx.store.event(ctx.name, "repeat_error", f"stage {stage.name}: keeping the workers of {key} out of its repeat: {exc}",
                            level="warning", subject=key)
            return made
        crash_point("repeat.after_group")
        orig = originals[key]
        with ctx.store.session() as s:
            s.add(HitRow(campaign=ctx.name, stage=stage.name, hit_key=twin, batch=orig.batch, item_keys=orig.item_keys,
                         annotation=ctx.annotation(stage.name, twin), token=ctx.token(twin, 0), reward=orig.reward,
                         assignments=orig.assignments))
            ctx.store.set_kv(ctx.name, Keys.repeat_group(twin), gid, session=s)
        made += 1
    ctx.store.set_kv(ctx.name, Keys.repeat(stage.name), PLANNED)
    ctx.store.event(ctx.name, "repeat_planned", f"stage {stage.name}: {len(chosen)} of {len(originals)} HITs posted again "
                    f"to workers who did not do them (share {stage.repeat.share:g})", data={"hits": chosen})
    return made


def excluded_groups(ctx: Context, hit: HitRow) -> tuple[str, ...]:
    """The worker groups a HIT's type must shut out: for a repeat twin, the original's workers."""
    if not is_repeat(hit.hit_key):
        return ()
    gid = ctx.store.get_kv(ctx.name, Keys.repeat_group(hit.hit_key))
    if gid is None:  # written with the draft: missing means the store was changed by hand
        raise LookupError(f"repeat HIT {hit.hit_key} has no worker group to keep the original's workers out")
    return (gid,)
