"""Carrying out the user's intents written by `campaign cancel` and `campaign extend`, and the two steps
that bracket every pass for the dashboard: the daemon's heartbeat first, alerts last."""

from __future__ import annotations

import logging
import math
import time

from sqlmodel import col, select

from campaign.ledger import release_hit_rest
from campaign.marketplaces.base import AlreadyDone, MarketError, TransientError
from campaign.state import CampaignStatus, HitStatus, Keys
from campaign.steps.context import Context, get_row, remote_id
from campaign.steps.post import post_pending
from campaign.store import CampaignRow, HitRow

log = logging.getLogger(__name__)


def post_interrupted(ctx: Context) -> int:
    """While cancelling: finish posts a crash cut short (so they can be expired), start no new ones."""
    return post_pending(ctx, only_interrupted=True)


def apply_extend(ctx: Context) -> None:
    """Carry out `campaign extend`: every open HIT's expiry moved on by the hours asked for, capped at the
    longest a HIT may live (`MAX_EXTEND_HOURS` from now). A HIT the marketplace refuses to extend is named
    in one event and the others are still extended; only a passing failure (`TransientError`, a throttled
    marketplace) leaves the rest for the next pass. An intent that is no number of hours (written by hand,
    or by an older version that let `nan` through) is dropped with one event instead of failing the step
    every pass.

    HITs go in row order behind a cursor ("HOURS ID", `Keys.EXTEND_CURSOR`) written with each HIT's new
    expiry, so a pass that stops part way (throttled, or killed) goes on after the last HIT it recorded
    instead of moving the first ones again from their new expiry. Hours asked for meanwhile are added to
    the intent by the command (`campaign extend`); this step takes away only the hours it applied, in one
    conditional write (`Store.swap_kv`), and the rest waits for the next pass."""
    raw = ctx.store.get_kv(ctx.name, Keys.EXTEND_HOURS, "0") or "0"
    hours = extend_hours(raw)
    if hours is None:
        with ctx.store.session() as s:
            if ctx.store.swap_kv(ctx.name, Keys.EXTEND_HOURS, raw, "0", session=s):
                ctx.store.set_kv(ctx.name, Keys.EXTEND_CURSOR, "", session=s)
                ctx.store.event(ctx.name, "extend_error", f"extension of {raw[:40]!r} h dropped: not a number of hours "
                                f"above 0 and at most {MAX_EXTEND_HOURS:g}; nothing was extended", level="warning", session=s)
        return
    if hours == 0:
        return
    applied, after = _extend_cursor(ctx.store.get_kv(ctx.name, Keys.EXTEND_CURSOR, "") or "")
    if applied > hours:  # not this intent's (the intent only grows while a cursor stands): start afresh
        applied, after = 0.0, 0
    with ctx.store.session() as s:
        hits = s.exec(select(HitRow).where(HitRow.campaign == ctx.name, HitRow.status == HitStatus.POSTED)
                      .order_by(col(HitRow.id))).all()
    now = ctx.clock.now()
    limit = now + MAX_EXTEND_HOURS * 3600
    extended = capped = earlier = 0
    for hit in hits:
        due = hours - applied if (hit.id or 0) <= after else hours
        earlier += due <= 0
        new: float | None = None
        if due > 0:
            new = max(hit.expires_at or now, now) + due * 3600
            if new > limit:
                new, capped = limit, capped + 1
            try:
                ctx.market.extend_hit(remote_id(hit), new)
            except AlreadyDone:
                pass  # the marketplace's implicit token: the same extension twice is done once
            except TransientError as exc:
                ctx.store.event(ctx.name, "extend_error", f"{hit.hit_key}: {exc}; the rest is extended on a later pass",
                                level="warning")
                return
            except MarketError as exc:  # refused for this HIT (too old, disposed): the others are still extended
                ctx.store.event(ctx.name, "extend_error", f"{hit.hit_key} not extended: {exc}", level="warning",
                                subject=hit.hit_key)
                new = None
        with ctx.store.session() as s:
            if new is not None:
                row = get_row(s, HitRow, hit.id)
                row.expires_at = float(int(new))
                s.add(row)
                extended += 1
            ctx.store.set_kv(ctx.name, Keys.EXTEND_CURSOR, f"{hours!r} {hit.id}", session=s)
    def less(stored: str | None) -> str:  # the intent without the hours applied here
        left = (extend_hours(stored or "0") or hours) - hours
        return str(left) if left > 0 else "0"

    with ctx.store.session() as s:  # the hours applied leave the intent; hours asked for meanwhile stay
        stored: str | None = raw
        while not ctx.store.swap_kv(ctx.name, Keys.EXTEND_HOURS, stored, less(stored), session=s):
            stored = ctx.store.get_kv(ctx.name, Keys.EXTEND_HOURS, session=s)
        ctx.store.set_kv(ctx.name, Keys.EXTEND_CURSOR, "", session=s)
    cap = f" ({capped} capped at {MAX_EXTEND_HOURS:g} h from now, the longest a HIT may live)" if capped else ""
    before = f" ({earlier} more on an earlier pass)" if earlier else ""
    ctx.store.event(ctx.name, "extended", f"{extended} open HIT{'' if extended == 1 else 's'} extended by {hours:g} h{before}{cap}")


def _extend_cursor(text: str) -> tuple[float, int]:
    """(hours applied, last HIT row id they were applied to) from `Keys.EXTEND_CURSOR`; (0, 0) when none
    or unreadable (then every HIT gets the whole intent, as before the cursor existed)."""
    parts = text.split()
    if len(parts) != 2 or not parts[1].isdigit():
        return 0.0, 0
    hours = extend_hours(parts[0])
    return (hours, int(parts[1])) if hours is not None else (0.0, 0)


#: The longest a HIT may live from now, in hours: MTurk's LifetimeInSeconds allows a year, and an
#: extension cannot go further (the built-in marketplace refuses an ExpireAt beyond it)
MAX_EXTEND_HOURS = 365 * 24.0


def extend_hours(text: str) -> float | None:
    """The hours of an extension intent, or None when `text` is no number in (0, MAX_EXTEND_HOURS]
    (0 means none is pending)."""
    try:
        hours = float(text)
    except ValueError:
        return None
    if not math.isfinite(hours) or hours < 0 or hours > MAX_EXTEND_HOURS:
        return None
    return hours


def apply_cancel(ctx: Context) -> bool:
    """Expire every open HIT now, drop drafts, release reservations; True when the cancel is complete.

    Work already submitted is still collected and reviewed (people did it); HITs close as their
    assignments are decided, and the campaign turns `cancelled` when none is left open.
    """
    past = float(int(ctx.clock.now()) - 60)
    with ctx.store.session() as s:
        for row in s.exec(select(HitRow).where(HitRow.campaign == ctx.name, HitRow.status == HitStatus.DRAFT)).all():
            row.status = HitStatus.CANCELLED
            s.add(row)
        hits = s.exec(select(HitRow).where(HitRow.campaign == ctx.name, col(HitRow.status).in_((HitStatus.POSTED, HitStatus.POSTING)))).all()
    for hit in hits:
        if hit.status == HitStatus.POSTING:
            continue  # post_pending finishes or reconciles it first; cancelled on a later tick
        if hit.expires_at is not None and hit.expires_at <= ctx.clock.now():
            continue
        try:
            ctx.market.expire_hit(remote_id(hit), past)
        except MarketError as exc:
            ctx.store.event(ctx.name, "cancel_error", f"{hit.hit_key}: {exc}", level="warning")
            return False
        with ctx.store.session() as s:
            row = get_row(s, HitRow, hit.id)
            row.expires_at = past
            s.add(row)
    with ctx.store.session() as s:
        still = s.exec(select(HitRow).where(HitRow.campaign == ctx.name, col(HitRow.status).in_((HitStatus.POSTED, HitStatus.POSTING)))).all()
        if still:
            return False
        for row in s.exec(select(HitRow).where(HitRow.campaign == ctx.name)).all():
            release_hit_rest(s, ctx.name, row.hit_key)
        camp = get_row(s, CampaignRow, ctx.name)
        camp.status = CampaignStatus.CANCELLED
        s.add(camp)
        ctx.store.event(ctx.name, CampaignStatus.CANCELLED, "campaign cancelled; no HIT is left open and no money reserved", session=s)
    return True


def heartbeat(ctx: Context) -> None:
    """The daemon is alive and has seen the campaign's status (the dashboard's acknowledgement of p / c)."""
    from campaign.readmodel.heartbeat import record_heartbeat

    with ctx.store.session() as s:
        status = get_row(s, CampaignRow, ctx.name).status
    record_heartbeat(ctx.store, ctx.name, status, ctx.clock.now(), getattr(ctx.clock, "speed", 1.0))


ALERTS_READER = "alerts:reader"  # Context.cache: the campaign's Reader, kept from pass to pass
ALERTS_LAST = "alerts:last"  # Context.cache: time.monotonic() of the last alerts step (with Context.alerts_every)


def alerts(ctx: Context) -> None:
    """Each condition the dashboard flags becomes one event when it appears. The Reader is kept in the
    context from pass to pass, so a pass reads only the answers collected since the last one (a new
    Reader every pass read every answer of the campaign again: the step that grew with the run).

    On the wall clock a campaign's alerts are looked at every `Context.alerts_every` seconds, not every
    pass: the figures behind them (the dashboard's) were 16% of a daemon's CPU at 470,000 propositions,
    20 campaigns a daemon, for conditions a person reads in minutes."""
    from campaign.readmodel.snapshot import Reader
    from campaign.steps.alerts import raise_alerts

    if ctx.alerts_every > 0:
        last = ctx.cache.get(ALERTS_LAST)
        if isinstance(last, float) and time.monotonic() - last < ctx.alerts_every:
            return
        ctx.cache[ALERTS_LAST] = time.monotonic()
    reader = ctx.cache.get(ALERTS_READER)
    if not isinstance(reader, Reader):
        reader = ctx.cache[ALERTS_READER] = Reader(ctx.store, ctx.state_dir)
    raise_alerts(ctx.store, ctx.name, state_dir=ctx.state_dir, reader=reader)
