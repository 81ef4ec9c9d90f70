"""Posting HITs, crash-safe.

For each draft: reserve its cost and mark it `posting` in one transaction (the intent), then ask the
marketplace to create the HIT with the draft's deterministic token and annotation, then record the HIT
id. A crash anywhere leaves either a draft (nothing happened), or a `posting` row whose token makes the
repeated call find the HIT the first call made; past the marketplace's token lifetime (MTurk: 24 hours)
the HIT is found by its annotation instead.
"""

from __future__ import annotations

import logging
import time
from decimal import Decimal

from sqlmodel import col, select

from campaign.ledger import BudgetExceeded, release_hit_rest, reserve_hit
from campaign.marketplaces.base import HitRequest, HitType, MarketError, RemoteHit, TransientError, fees_of
from campaign.spec import Stage
from campaign.steps.budget import note_blocked
from campaign.steps.context import Context, crash_point, get_row
from campaign.steps.repeat import excluded_groups
from campaign.store import CampaignRow, HitRow, ItemRow
from campaign.tasks import get as get_kind
from campaign.tasks.base import ShownItem

log = logging.getLogger(__name__)

STEP_SECONDS = 2.0  # wall seconds one pass may spend posting (see `post_pending`)


def hit_type_id(ctx: Context, stage: Stage, excluded: tuple[str, ...] = ()) -> str:
    """The stage's HIT type: idempotent on the marketplace (identical settings, same id), so no state is needed.
    `excluded`: worker groups shut out (a repeat HIT's original workers, see `campaign.steps.repeat`)."""
    hit_type = HitType(title=stage.title, description=stage.description, reward=stage.reward, duration=stage.duration,
                       auto_approval_delay=stage.auto_approval_delay, keywords=stage.keywords,
                       qualifications=stage.qualifications, excluded_groups=excluded)
    return ctx.market.create_hit_type(hit_type, sandbox=ctx.campaign.marketplace != "mturk")


def page(ctx: Context, stage: Stage, hit: HitRow) -> str:
    """The HIT's page as its task kind renders it, from the items' texts in the store."""
    with ctx.store.session() as s:
        rows = {r.item_key: r for r in s.exec(select(ItemRow).where(ItemRow.campaign == ctx.name, col(ItemRow.item_key).in_(hit.keys()))).all()}
    items = [ShownItem(key=k, text=rows[k].text) for k in hit.keys()]
    return get_kind(stage.kind).page(stage, items, ctx.campaign.topic)


def _campaign_status(ctx: Context) -> str:
    with ctx.store.session() as s:
        row = s.get(CampaignRow, ctx.name)
        return row.status if row else "running"


def post_pending(ctx: Context, limit: int | None = None, only_interrupted: bool = False,
                 seconds: float = STEP_SECONDS) -> int:
    """Post drafts (and finish interrupted posts) for up to `seconds` of wall time (and at most `limit`
    HITs); returns how many HITs went up.

    A time budget rather than a count: posting keeps up with what the marketplace takes (9,400 HITs go
    up in as many requests, not in 47 ticks of 200), while the pass still reaches collect and review
    often enough to decide on work before the marketplace approves it by itself.
    `only_interrupted` finishes posts that a crash cut short without starting new ones (cancelling).
    """
    posted = 0
    deadline = time.monotonic() + seconds
    type_ids: dict[tuple[str, tuple[str, ...]], str] = {}
    with ctx.store.session() as s:
        pending = s.exec(
            select(HitRow).where(HitRow.campaign == ctx.name, col(HitRow.status).in_(("draft", "posting"))).order_by(col(HitRow.id))
        ).all()
    if only_interrupted:
        pending = [h for h in pending if h.status == "posting"]
    for n, hit in enumerate(pending[:limit]):
        if n and time.monotonic() > deadline:
            break
        if not only_interrupted and _campaign_status(ctx) != "running":
            break
        stage = ctx.campaign.stage(hit.stage)
        if hit.status == "draft":
            try:
                with ctx.store.session() as s:
                    row = get_row(s, HitRow, hit.id)
                    if row.status != "draft":
                        continue
                    amount = reserve_hit(s, ctx.name, ctx.campaign.budget, row.hit_key, Decimal(row.reward), row.assignments,
                                         fees_of(ctx.market))
                    row.status = "posting"
                    row.reserved = str(amount)
                    row.posting_started_at = ctx.clock.now()
                    s.add(row)
                    hit = row
            except BudgetExceeded as exc:
                note_blocked(ctx, str(exc), hit.hit_key)  # one event; `steps.budget` ends the campaign once drained
                break
        crash_point("post.before_call")
        try:
            type_key = (stage.name, excluded_groups(ctx, hit))
            if type_key not in type_ids:
                type_ids[type_key] = hit_type_id(ctx, stage, type_key[1])
            remote = _create_or_find(ctx, stage, hit, type_ids[type_key])
        except TransientError as exc:  # throttled or cut off: the call may or may not have happened
            ctx.store.event(ctx.name, "throttled" if exc.throttled else "marketplace_error",
                            f"posting {hit.hit_key}: {exc}", level="warning", subject=hit.hit_key)
            break  # try again on the next tick, with the same token
        except MarketError as exc:
            _fail(ctx, hit, str(exc))
            continue
        crash_point("post.after_call")
        if remote.reconciled:
            ctx.store.event(ctx.name, "reconciled", f"{hit.hit_key} was already posted as {remote.hit_id}", subject=hit.hit_key)
        _record_posted(ctx, hit, remote)
        posted += 1
    return posted


def _create_or_find(ctx: Context, stage: Stage, hit: HitRow, type_id: str) -> RemoteHit:
    """Create the HIT with the draft's token; past the token's lifetime, look for it by annotation first."""
    lifetime = ctx.market.capabilities.token_lifetime  # None: the marketplace keeps no tokens at all
    started = hit.posting_started_at
    if started is not None and (lifetime is None or ctx.clock.now() - started > lifetime - 600):
        found = ctx.market.find_by_annotation(hit.annotation)
        if found is not None:
            return found
        with ctx.store.session() as s:  # the old token may be forgotten: a new attempt gets a new token
            row = get_row(s, HitRow, hit.id)
            row.token_attempt += 1
            row.token = ctx.token(row.hit_key, row.token_attempt)
            row.posting_started_at = ctx.clock.now()
            s.add(row)
            hit.token, hit.token_attempt = row.token, row.token_attempt
    request = HitRequest(html=page(ctx, stage, hit), max_assignments=hit.assignments, lifetime=stage.lifetime,
                         annotation=hit.annotation, token=hit.token)
    return ctx.market.create_hit(type_id, request)


def _record_posted(ctx: Context, hit: HitRow, remote: RemoteHit) -> None:
    with ctx.store.session() as s:
        row = get_row(s, HitRow, hit.id)
        row.hit_id = remote.hit_id
        row.hit_type_id = remote.type_id
        row.status = "posted"
        row.posted_at = ctx.clock.now()
        row.expires_at = remote.expires_at
        s.add(row)
        log.debug("posted %s as %s", row.hit_key, row.hit_id)


def _fail(ctx: Context, hit: HitRow, why: str) -> None:
    with ctx.store.session() as s:
        row = get_row(s, HitRow, hit.id)
        row.status = "failed"
        row.error = why[:1000]
        s.add(row)
        release_hit_rest(s, ctx.name, row.hit_key)
        ctx.store.event(ctx.name, "post_failed", f"{row.hit_key}: {why}", level="error", subject=row.hit_key, session=s)
