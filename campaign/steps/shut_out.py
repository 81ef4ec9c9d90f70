"""Keeping the workers quality control excluded out of a campaign's later stages.

A worker whose labels a stage left out (a random answerer, someone not reading) is not trusted in the
stages that follow it: their labels there are left out too (`campaign.quality.review.carried_exclusions`).
Taking their work would only waste the slots: on the hostile bench the Likert stage's constant spammers
and random answerers went on to fill a sixth of the ranking's answers, which honest workers would
otherwise have given. So the HIT types of every stage after the campaign's first policed one shut out a
worker group of the campaign (`WorkerGroups`: on MTurk a requester qualification type required
`DoesNotExist`, as a stage's repeat does; on Prolific the task site's, so the door has no task for them
and they are asked to return the place), and this step adds to it every worker excluded by a stage that
is done (its exclusions are final then; a stage under way may still clear a worker as evidence grows).
The group is made (by a name unique to the campaign instance, found again by that name after a crash)
when the first such HIT type is made or the first worker is added, whichever comes first, and its id is
kept in the store (`Keys.SHUT_OUT_GROUP`).

Adding a member is idempotent on the marketplace, so the order is call, then record (`Keys.SHUT_OUT`): a
crash in between adds the same worker again. Nothing here moves money. A marketplace without worker
groups keeps nobody out: the labels are still left out of the scores.
"""

from __future__ import annotations

import json

from sqlmodel import col, select

from campaign.marketplaces.base import MarketError, TransientError, WorkerGroups
from campaign.spec import Stage
from campaign.state import Keys
from campaign.steps.context import Context
from campaign.steps.isolation import note_once
from campaign.steps.quality_pass import stage_review
from campaign.steps.stages import stage_done
from campaign.store import HitRow
from campaign.tasks import get as get_kind


def _first_policed(ctx: Context) -> int | None:
    if not ctx.campaign.quality.enabled:
        return None
    return next((i for i, s in enumerate(ctx.campaign.stages) if get_kind(s.kind).policed), None)


def shuts_out(ctx: Context, stage: Stage) -> bool:
    """Whether the stage's HITs shut out the workers excluded before it: it follows a policed stage, and the
    marketplace has worker groups."""
    first = _first_policed(ctx)
    if first is None or not isinstance(ctx.market, WorkerGroups):
        return False
    return [s.name for s in ctx.campaign.stages].index(stage.name) > first


def group_name(ctx: Context) -> str:
    """Unique per requester (MTurk requires it) and per campaign instance, readable in the requester UI."""
    return f"campaign {ctx.name} {ctx.instance[:8]} excluded workers"


def shut_out_group(ctx: Context) -> str:
    """The campaign's group of excluded workers, made once (`WorkerGroups.worker_group` is found again by
    name, so a crash before its id is stored makes nothing twice)."""
    gid = ctx.store.get_kv(ctx.name, Keys.SHUT_OUT_GROUP)
    if gid:
        return gid
    market = ctx.market
    assert isinstance(market, WorkerGroups)
    gid = market.worker_group(group_name(ctx))
    ctx.store.set_kv(ctx.name, Keys.SHUT_OUT_GROUP, gid)
    return gid


def shut_out_groups(ctx: Context, stage: Stage) -> tuple[str, ...]:
    """The worker groups a HIT type of `stage` shuts out for the campaign's exclusions (see `shuts_out`).

    Decided once per stage, at its first post, and kept (`Keys.shut_out_stage`): every HIT of a stage has
    one HIT type (on Prolific one study). A stage a release before this one began posting keeps the HIT
    type it has: none of its HITs shuts anybody out."""
    key = Keys.shut_out_stage(stage.name)
    decided = ctx.store.get_kv(ctx.name, key)
    if decided is None:
        with ctx.store.session() as s:
            started = s.exec(select(HitRow.id).where(HitRow.campaign == ctx.name, HitRow.stage == stage.name,
                                                     col(HitRow.hit_id).is_not(None))).first() is not None
        decided = shut_out_group(ctx) if shuts_out(ctx, stage) and not started else ""
        ctx.store.set_kv(ctx.name, key, decided)
    return (decided,) if decided else ()


HANDLED = "shut_out:handled"  # ctx.cache: done stage -> the stored review whose exclusions are all in the group


def shut_out(ctx: Context) -> int:
    """The step: every worker excluded by a stage that is done (and followed by another), not yet in the
    group, is added to it; returns how many were added now. One that fails is tried again next pass, the
    others are added. A done stage whose stored review's exclusions are all in the group is not read
    again by this daemon while that review stays as it is, so a pass costs one key read per stage."""
    market = ctx.market
    first = _first_policed(ctx)
    if first is None or not isinstance(market, WorkerGroups) or first == len(ctx.campaign.stages) - 1:
        return 0  # no stage follows a policed one
    handled: dict[str, int] = ctx.cache.setdefault(HANDLED, {})
    followed = ctx.campaign.stages[first:-1]  # a stage's exclusions matter to the stages after it
    stored = {st.name: hash(ctx.store.get_kv(ctx.name, Keys.review(st.name)) or "") for st in followed if get_kind(st.kind).policed}
    done = [st for st in followed if st.name in stored and handled.get(st.name) != stored[st.name] and stage_done(ctx, st.name)]
    if not done:
        return 0
    reviews = {st.name: stage_review(ctx, st) for st in done}
    members = set(json.loads(ctx.store.get_kv(ctx.name, Keys.SHUT_OUT, "[]") or "[]"))
    added = 0
    failed = False
    for name, review in reviews.items():
        for w in sorted(review.excluded if review is not None else ()):
            if w in members:
                continue
            try:
                market.add_to_group(shut_out_group(ctx), w)
            except TransientError as exc:
                ctx.store.event(ctx.name, "marketplace_error", f"keeping {w} out of later stages: {exc}", level="warning", subject=w)
                return added  # throttled or unavailable: the rest next pass
            except MarketError as exc:
                note_once(ctx, "shut-out", w, exc)
                failed = True
                continue
            members.add(w)
            ctx.store.set_kv(ctx.name, Keys.SHUT_OUT, json.dumps(sorted(members)))
            ctx.store.event(ctx.name, "worker_shut_out", f"{w}: excluded, kept out of the campaign's later stages", subject=w)
            added += 1
        if not failed:
            handled[name] = stored[name]
    return added
