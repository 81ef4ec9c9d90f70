"""Posting HITs, crash-safe.

For each draft: reserve its cost and mark it `posting` in one transaction (the intent), then ask the
marketplace to create the HIT with the draft's deterministic token and annotation, then record the HIT
id. A crash anywhere leaves either a draft (nothing happened), or a `posting` row whose token makes the
repeated call find the HIT the first call made; past the marketplace's token lifetime (MTurk: 24 hours)
the HIT is found by its annotation instead.
"""

from __future__ import annotations

import json
import logging
import time
from decimal import Decimal

from sqlmodel import col, select
from sqlmodel.sql.expression import SelectOfScalar

from campaign.clock import work_deadline
from campaign.crash import crash_point
from campaign.ledger import BudgetExceeded, release_hit_rest, reserve_hits
from campaign.marketplaces.base import HitRequest, HitType, MarketError, RemoteHit, TransientError, fees_of
from campaign.spec import Stage
from campaign.state import CampaignStatus, HeldKind, HitStatus
from campaign.steps.budget import note_blocked
from campaign.steps.context import BEHIND_COLLECT, BEHIND_REVIEW, Context, get_row
from campaign.steps.isolation import describe, hold
from campaign.steps.repeat import excluded_groups
from campaign.steps.shut_out import shut_out_groups
from campaign.store import PENDING_SQL, CampaignRow, HitRow, ItemRow
from campaign.tasks import get as get_kind
from campaign.tasks.base import ShownItem

log = logging.getLogger(__name__)

STEP_SECONDS = 2.0  # wall seconds one pass may spend posting (see `post_pending`)


HIT_TYPE_TAG = "post:hit_type_tag"  # Context.cache: the campaign's HIT type tag, read once from the store


def hit_type_tag(ctx: Context) -> str:
    """The keyword that gives the campaign's HITs a HIT type of their own (`hit_type_tag` in the stored
    spec, written when the campaign is created; campaigns created before it existed have none and keep
    their HIT types): the marketplace then lists each campaign's reviewable HITs apart (collect)."""
    tag = ctx.cache.get(HIT_TYPE_TAG)
    if not isinstance(tag, str):
        with ctx.store.session() as s:
            row = s.get(CampaignRow, ctx.name)
            spec = json.loads(row.spec_json or "{}") if row is not None else {}
        tag = ctx.cache[HIT_TYPE_TAG] = str(spec.get("hit_type_tag") or "")
    return tag


def hit_type_id(ctx: Context, stage: Stage, excluded: tuple[str, ...] = ()) -> str:
    """The stage's HIT type: idempotent on the marketplace (identical settings, same id), so no state is needed.
    `excluded`: worker groups shut out (a repeat HIT's original workers, see `campaign.steps.repeat`).
    The campaign's tag (`hit_type_tag`) is one more keyword, so two campaigns never share a type."""
    tag = hit_type_tag(ctx)
    keywords = f"{stage.keywords}, {tag}" if tag and stage.keywords else (tag or stage.keywords)
    hit_type = HitType(title=stage.title, description=stage.description, reward=stage.reward, duration=stage.duration,
                       auto_approval_delay=stage.auto_approval_delay, keywords=keywords,
                       qualifications=stage.qualifications, excluded_groups=excluded)
    return ctx.market.create_hit_type(hit_type, sandbox=ctx.market.capabilities.sandbox_qualifications)


def page(ctx: Context, stage: Stage, hit: HitRow, texts: dict[str, str] | None = None) -> str:
    """The HIT's page as its task kind renders it, from the items' texts in the store (or `texts`, the
    texts by item key when the caller read them already)."""
    if texts is None:
        texts = _texts(ctx, hit.keys())
    items = [ShownItem(key=k, text=texts[k]) for k in hit.keys()]
    return get_kind(stage.kind).page(stage, items, ctx.campaign.topic)


def _texts(ctx: Context, keys: list[str]) -> dict[str, str]:
    with ctx.store.session() as s:
        return dict(s.exec(select(ItemRow.item_key, ItemRow.text).where(ItemRow.campaign == ctx.name,
                                                                        col(ItemRow.item_key).in_(keys))).all())


def _campaign_status(ctx: Context) -> str:
    with ctx.store.session() as s:
        row = s.get(CampaignRow, ctx.name)
        return row.status if row else CampaignStatus.RUNNING


CHUNK = 10  # intents written per transaction (and the budget checked once for them)
_READ = 500  # drafts read from the store per pass at most


def post_pending(ctx: Context, limit: int | None = None, only_interrupted: bool = False,
                 seconds: float = STEP_SECONDS) -> int:
    """Post drafts (and finish interrupted posts) for up to `seconds` of wall time (and at most `limit`
    HITs); returns how many HITs went up.

    A time budget rather than a count: posting keeps up with what the marketplace takes (9,400 HITs go
    up in as many requests, not in 47 ticks of 200), while the pass still reaches collect and review
    often enough to decide on work before the marketplace approves it by itself.
    Intents are written `CHUNK` at a time, each chunk's reservations against one reading of the
    ledger's totals (read per HIT, they made posting quadratic in the campaign's size); every HIT is
    still recorded as posted right after its own call.
    `only_interrupted` finishes posts that a crash cut short without starting new ones (cancelling).
    """
    posted = 0
    deadline = work_deadline(ctx.clock, seconds)
    type_ids: dict[tuple[str, tuple[str, ...]], str] = {}
    shut_out: dict[str, tuple[str, ...]] = {}  # per stage: the groups of excluded workers its HIT types shut out
    if behind(ctx):
        # backpressure: the last pass left finished work uncollected or undecided. New HITs would only
        # feed the crowd faster than this daemon decides, and work it cannot decide in time is
        # approved by the marketplace unreviewed (at 47,000 assignments, 1,688 were); posts a crash
        # cut short are still finished
        only_interrupted = True
    with ctx.store.session() as s:
        pending = s.exec(pending_hits(ctx.name, only_interrupted, min(limit, _READ) if limit is not None else _READ)).all()
    for first in range(0, len(pending), CHUNK):
        if first and time.monotonic() > deadline:
            break
        if not only_interrupted and _campaign_status(ctx) != CampaignStatus.RUNNING:
            break
        chunk, blocked = _intents(ctx, list(pending[first:first + CHUNK]))
        texts = _texts(ctx, [k for hit in chunk for k in hit.keys()])
        for hit in chunk:
            stage = ctx.campaign.stage(hit.stage)
            crash_point("post.before_call")
            try:
                groups = shut_out.get(stage.name)
                if groups is None:
                    groups = shut_out[stage.name] = shut_out_groups(ctx, stage)
                type_key = (stage.name, groups + excluded_groups(ctx, hit))
                if type_key not in type_ids:
                    type_ids[type_key] = hit_type_id(ctx, stage, type_key[1])
                remote = _create_or_find(ctx, stage, hit, type_ids[type_key], texts)
            except TransientError as exc:  # throttled or cut off: the call may or may not have happened
                ctx.store.event(ctx.name, "throttled" if exc.throttled else "marketplace_error",
                                f"posting {hit.hit_key}: {exc}", level="warning", subject=hit.hit_key)
                return posted  # try again on the next tick, with the same token
            except MarketError as exc:
                _fail(ctx, hit, str(exc))
                continue
            except Exception as exc:  # a failure of ours on this HIT: held with its reservation, the others go up
                _hold(ctx, hit, exc)
                continue
            crash_point("post.after_call")
            if remote.reconciled:
                ctx.store.event(ctx.name, "reconciled", f"{hit.hit_key} was already posted as {remote.hit_id}", subject=hit.hit_key)
            _record_posted(ctx, hit, remote)
            posted += 1
        if blocked is not None:
            note_blocked(ctx, str(blocked[1]), blocked[0])  # one event; `steps.budget` ends the campaign once drained
            break
    return posted


def pending_hits(campaign: str, only_interrupted: bool, limit: int) -> SelectOfScalar[HitRow]:
    """The campaign's first `limit` HITs still to post, by id: drafts and posts a crash cut short, or the
    latter only.

    Read through the partial index of the HITs still to post (`PENDING_SQL`, the statuses as literals),
    so a pass reads what is left to post, however many HITs the store holds. With the statuses as
    parameters, PostgreSQL's generic plan for the prepared statement walked the primary key through
    every HIT of every campaign (94,000 propositions: 48 ms a call, most calls finding nothing)."""
    interrupted = (HitRow.status == HitStatus.POSTING,) if only_interrupted else ()
    return select(HitRow).where(HitRow.campaign == campaign, PENDING_SQL, *interrupted).order_by(col(HitRow.id)).limit(limit)


def behind(ctx: Context) -> bool:
    """Whether this daemon's last collect or review ran out of time with work left."""
    return bool(ctx.cache.get(BEHIND_COLLECT) or ctx.cache.get(BEHIND_REVIEW))


def _intents(ctx: Context, chunk: list[HitRow]) -> tuple[list[HitRow], tuple[str, BudgetExceeded] | None]:
    """Reserve the chunk's drafts and mark them `posting` in one transaction (the intent, written before
    any of their calls); returns the HITs to post (interrupted posts included) and, when the budget ran
    out, the first HIT it could not cover with the error."""
    drafts = [h for h in chunk if h.status == HitStatus.DRAFT]
    if not drafts:
        return chunk, None
    with ctx.store.session() as s:
        rows = {r.id: r for r in s.exec(select(HitRow).where(col(HitRow.id).in_([h.id for h in drafts]))).all()}
        fresh = [rows[h.id] for h in drafts if h.id in rows and rows[h.id].status == HitStatus.DRAFT]
        amounts, err = reserve_hits(s, ctx.name, ctx.campaign.budget,
                                    [(r.hit_key, Decimal(r.reward), r.assignments) for r in fresh], fees_of(ctx.market))
        now = ctx.clock.now()
        for row in fresh:
            if row.hit_key not in amounts:
                continue
            row.status = HitStatus.POSTING
            row.reserved = str(amounts[row.hit_key])
            row.posting_started_at = now
            s.add(row)
        reserved = {r.id: r for r in fresh if r.hit_key in amounts}
    out: list[HitRow] = []
    failed = next((r.hit_key for r in fresh if r.hit_key not in amounts), None) if err is not None else None
    for h in chunk:
        if h.hit_key == failed and err is not None:
            return out, (h.hit_key, err)
        if h.status == HitStatus.POSTING:
            out.append(h)
        elif h.id in reserved:
            out.append(reserved[h.id])
    return out, None


def _create_or_find(ctx: Context, stage: Stage, hit: HitRow, type_id: str, texts: dict[str, str] | None = None) -> RemoteHit:
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
    request = HitRequest(html=page(ctx, stage, hit, texts), max_assignments=hit.assignments, lifetime=stage.lifetime,
                         annotation=hit.annotation, token=hit.token)
    return ctx.market.create_hit(type_id, request)


def _record_posted(ctx: Context, hit: HitRow, remote: RemoteHit) -> None:
    with ctx.store.session() as s:
        row = get_row(s, HitRow, hit.id)
        row.hit_id = remote.hit_id
        row.hit_type_id = remote.type_id
        row.status = HitStatus.POSTED
        row.posted_at = ctx.clock.now()
        row.expires_at = remote.expires_at
        s.add(row)
        log.debug("posted %s as %s", row.hit_key, row.hit_id)


def _hold(ctx: Context, hit: HitRow, exc: Exception) -> None:
    """Quarantine a HIT whose posting failed for a reason of ours (invariant 8). Its reservation stays
    (the call may have happened: settling it looks the HIT up by its annotation)."""
    with ctx.store.session() as s:
        row = get_row(s, HitRow, hit.id)
        if row.status not in (HitStatus.DRAFT, HitStatus.POSTING):
            return
        row.status = HitStatus.HELD
        row.error = describe(exc)
        s.add(row)
        hold(ctx, HeldKind.HIT, row.hit_key, "post", exc, hit_key=row.hit_key, session=s)


def _fail(ctx: Context, hit: HitRow, why: str) -> None:
    with ctx.store.session() as s:
        row = get_row(s, HitRow, hit.id)
        row.status = HitStatus.FAILED
        row.error = why[:1000]
        s.add(row)
        release_hit_rest(s, ctx.name, row.hit_key)
        ctx.store.event(ctx.name, "post_failed", f"{row.hit_key}: {why}", level="error", subject=row.hit_key, session=s)
