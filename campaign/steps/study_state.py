"""Where a campaign's studies stand (marketplaces with studies, `campaign.marketplaces.base.Studies`), read
from the store: which study keys (HIT types) each stage has, and which studies are over (stopped, with
nothing left that could be paid). Written by `campaign.steps.studies`; read by it, by `finish` and by
the end for want of money (`campaign.steps.budget`), which must not end a campaign with a study open."""

from __future__ import annotations

from sqlmodel import col, select

from campaign.marketplaces.base import Studies
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


def studies_over(ctx: Context) -> bool:
    """True when the marketplace has no studies, or every study of this campaign is over."""
    if not isinstance(ctx.market, Studies):
        return True
    return all(ctx.store.get_kv(ctx.name, Keys.study_over(k), "") for keys in keys_by_stage(ctx).values() for k in keys)
