"""Where a campaign's studies stand (marketplaces with studies, `campaign.marketplaces.base.Studies`), read
from the store: which study keys (HIT types) each stage has, and which studies are over (stopped, with
nothing left that could be paid). Written by `campaign.steps.studies`; read by it, by `finish` and by
the end for want of money (`campaign.steps.budget`), which must not end a campaign with a study open."""

from __future__ import annotations

import json

from sqlmodel import col, select

from campaign.marketplaces.base import ReconcilesCost, Studies
from campaign.state import Keys
from campaign.steps.context import Context
from campaign.store import HitRow


def keys_by_stage(ctx: Context) -> dict[str, set[str]]:
    with ctx.store.session() as s:
        rows = s.exec(select(HitRow.stage, HitRow.hit_type_id).where(
            HitRow.campaign == ctx.name, col(HitRow.hit_type_id).is_not(None)).distinct()).all()
    out: dict[str, set[str]] = {}
    for stage, key in rows:
        if key is not None:
            out.setdefault(stage, set()).add(key)
    return out


# How long a finished study's money may disagree with what the service says it charged before the
# campaign ends all the same (the alert stands): a bonus paid shows on Prolific "in the following minutes",
# so a reconciliation read right after the last payment may be short of it; it is read again every pass.
RECONCILE_WAIT = 900.0  # seconds of the run's clock


def studies_over(ctx: Context) -> bool:
    """True when the marketplace has no studies, or every study of this campaign is over and its money
    reconciled with the service's figure (or given `RECONCILE_WAIT` to agree)."""
    if not isinstance(ctx.market, Studies):
        return True
    keys = [k for ks in keys_by_stage(ctx).values() for k in ks]
    return all(ctx.store.get_kv(ctx.name, Keys.study_over(k), "") for k in keys) and all(_reconciled(ctx, k) for k in keys)


def _reconciled(ctx: Context, key: str) -> bool:
    if not isinstance(ctx.market, ReconcilesCost):
        return True
    last = json.loads(ctx.store.get_kv(ctx.name, Keys.study_cost(key), "") or "{}")
    if last and last.get("booked") == last.get("charged"):
        return True
    since = ctx.store.get_kv(ctx.name, Keys.study_cost_wait(key), "")
    if not since:
        return not last  # not read yet (the costs step reads it this pass), or unreadable: nothing to wait on
    return ctx.clock.now() - float(since) >= RECONCILE_WAIT
