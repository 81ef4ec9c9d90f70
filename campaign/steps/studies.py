"""Studies: recruiting on a marketplace that pays per place of a study (`campaign.marketplaces.base.Studies`,
Prolific), with the money in the campaign's ledger.

Each pass, for a marketplace that implements `Studies` (the others skip these steps):

- `open_places` (after posting): the places the posted work needs are reserved in the ledger first
  (place cost: reward + fee + VAT), then opened on the marketplace; a place the budget cannot cover is
  never opened (one `budget_stop` event, as for HITs). The reservation is the intent: a crash after it
  and before the call leaves places reserved and not yet opened, which the next pass opens (the call
  sets an absolute number and is idempotent).
- `settle_studies` (after review and closing): the marketplace sends every decision that is due (and
  repairs one a crash cut off between the task site and the marketplace); each approved submission is
  charged its place, once (the ledger's ref is the submission id), however and whenever it was
  approved; when a stage is complete (or the campaign is being cancelled, or out of money with none of
  the stage's HITs open) its studies are stopped, and once none of their submissions can still be paid
  the places never paid are released.

`finish` and the end for want of money wait for `study_state.studies_over`, so a campaign does not end with a study
still open (Prolific would auto-approve what came in later) or money still reserved for places.
"""

from __future__ import annotations

import logging

from sqlmodel import col, select

from campaign.ledger import charge_place, release_study_rest, reserve_places
from campaign.marketplaces.base import MarketError, Studies
from campaign.money import Cost, fmt
from campaign.steps.budget import BLOCKED_KEY, note_blocked
from campaign.steps.context import Context, crash_point
from campaign.steps.isolation import note_once
from campaign.steps.stages import OPEN, stage_done
from campaign.steps.study_state import keys_by_stage, over_key
from campaign.store import CampaignRow, HitRow

log = logging.getLogger(__name__)


def _places_key(key: str) -> str:
    return f"study_places:{key}"


def open_places(ctx: Context) -> int:
    """Reserve, then open, the places the posted work needs; returns how many places were opened now."""
    market = ctx.market
    if not isinstance(market, Studies):
        return 0
    try:
        wanted = market.places_wanted()
    except MarketError as exc:
        ctx.store.event(ctx.name, "marketplace_error", f"counting places: {exc}", level="warning")
        return 0
    cost = market.place_cost()
    opened = 0
    for key, places in sorted(wanted.items()):
        try:
            opened += _open(ctx, market, key, places, cost)
        except Exception as exc:  # this study only: the others still get their places (invariant 8)
            note_once(ctx, "places", key, exc)
    return opened


def _open(ctx: Context, market: Studies, key: str, places: int, cost: Cost) -> int:
    """Reserve, then open, one study's places; returns how many were opened now."""
    if ctx.store.get_kv(ctx.name, over_key(key), ""):
        return 0
    with ctx.store.session() as s:
        reserved, short = reserve_places(s, ctx.name, ctx.campaign.budget, key, places, cost)
    if short:
        note_blocked(ctx, short, key)
    before = int(ctx.store.get_kv(ctx.name, _places_key(key), "0") or 0)
    if reserved <= before:
        return 0
    crash_point("places.before_call")
    try:
        now = market.refill(key, reserved)
    except MarketError as exc:
        ctx.store.event(ctx.name, "marketplace_error", f"opening places of study {key}: {exc}", level="warning", subject=key)
        return 0
    crash_point("places.after_call")
    ctx.store.set_kv(ctx.name, _places_key(key), str(now))
    ctx.store.event(ctx.name, "places", f"study {key}: {now} places open ({fmt(cost.total)} reserved each)", subject=key)
    return now - before


def settle_studies(ctx: Context) -> int:
    """Send due decisions, charge approved places, stop finished studies and release what they did not
    spend; returns how many places were charged now."""
    market = ctx.market
    if not isinstance(market, Studies):
        return 0
    crash_point("studies.before_settle")
    try:
        subs = market.settle()
    except MarketError as exc:
        ctx.store.event(ctx.name, "marketplace_error", f"settling submissions: {exc}", level="warning")
        return 0
    cost = market.place_cost()
    charged = 0
    with ctx.store.session() as s:
        for sub in subs:
            try:
                with s.begin_nested():  # one submission that fails undoes only its own entry
                    if sub.status == "approved" and charge_place(s, ctx.name, sub.key, sub.submission_id, cost):
                        charged += 1
            except Exception as exc:  # the others are still charged; this one is tried again next pass
                note_once(ctx, "studies", sub.submission_id, exc)
    with ctx.store.session() as s:
        row = s.get(CampaignRow, ctx.name)
        cancelling = row is not None and row.status == "cancelling"
        open_stages = set(s.exec(select(HitRow.stage).where(HitRow.campaign == ctx.name,
                                                            col(HitRow.status).in_(OPEN)).distinct()).all())
    blocked = bool(ctx.store.get_kv(ctx.name, BLOCKED_KEY, ""))
    for stage, keys in sorted(keys_by_stage(ctx).items()):
        todo = [k for k in sorted(keys) if not ctx.store.get_kv(ctx.name, over_key(k), "")]
        drained = blocked and stage not in open_stages  # out of money, and nothing of the stage left to do
        if not todo or not (cancelling or drained or stage_done(ctx, stage)):
            continue
        for key in todo:
            try:
                over = market.stop(key)
            except MarketError as exc:
                ctx.store.event(ctx.name, "marketplace_error", f"stopping study {key}: {exc}", level="warning", subject=key)
                continue
            if not over:
                continue  # someone may still be paid: released once they are done
            with ctx.store.session() as s:
                freed = release_study_rest(s, ctx.name, key)
                ctx.store.set_kv(ctx.name, over_key(key), "1", session=s)
                ctx.store.event(ctx.name, "study_over", f"study {key} ({stage}) stopped; {fmt(freed)} of unused places "
                                "released", subject=key, session=s)
    return charged
