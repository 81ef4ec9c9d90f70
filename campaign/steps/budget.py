"""The budget: raising it on the user's word, and ending a campaign cleanly when it runs out.

When the next draft's worst-case cost no longer fits, posting stops (`post` notes it once under the
`budget_blocked` key). The HITs already up are still collected, reviewed and closed, since people are
doing that work; once none is open, the scores over what was collected are written and the campaign
turns `budget_exhausted`, with one event. `campaign budget NAME --set AMOUNT` writes the new amount
under `Keys.BUDGET_SET` (an intent, like pause/resume); the next tick adopts it and the campaign goes on.

The effective budget is the one in the campaign's row (the spec's at creation, then whatever the user
set), so every step reading `ctx.campaign.budget` sees it after `sync_budget` has run.
"""

from __future__ import annotations

import dataclasses
import logging
from decimal import Decimal, InvalidOperation

from sqlmodel import Session, col, func, select

from campaign.ledger import totals
from campaign.marketplaces.base import fees_of
from campaign.money import fmt, shown
from campaign.outfile import atomic_write
from campaign.readmodel.scores import write_scores
from campaign.state import CampaignStatus, HitStatus, Keys
from campaign.steps.context import Context, get_row
from campaign.steps.study_state import studies_over
from campaign.store import CampaignRow, HitRow, move_status
from campaign.tasks import get as get_kind

log = logging.getLogger(__name__)



def note_blocked(ctx: Context, message: str, hit_key: str) -> None:
    """Posting stopped for want of money: one event, however many ticks find it so."""
    if ctx.store.get_kv(ctx.name, Keys.BUDGET_BLOCKED, ""):
        return
    ctx.store.set_kv(ctx.name, Keys.BUDGET_BLOCKED, message)
    ctx.store.event(ctx.name, "budget_stop", f"{message}; finishing the HITs already posted", level="warning",
                    subject=hit_key)


def sync_budget(ctx: Context) -> None:
    """Adopt the user's new budget (if any) and make `ctx.campaign.budget` the row's budget."""
    wanted = ctx.store.get_kv(ctx.name, Keys.BUDGET_SET, "")
    with ctx.store.session() as s:
        row = get_row(s, CampaignRow, ctx.name)
        if wanted:
            try:
                amount = Decimal(wanted)
            except InvalidOperation:
                amount = Decimal(row.budget)
            committed = _committed(ctx, s, amount)
            if amount < committed:
                ctx.store.event(ctx.name, "budget_refused", f"budget {shown(amount, ctx.campaign.currency)} is below the {shown(committed, ctx.campaign.currency)} "
                                f"already spent or reserved; kept {shown(row.budget, ctx.campaign.currency)}", level="warning", session=s)
            else:
                before = row.budget
                row.budget = fmt(amount)
                s.add(row)
                s.flush()  # the budget column alone: a status another process wrote meanwhile is not overwritten
                if row.status == CampaignStatus.BUDGET_EXHAUSTED:  # and only exhausted turns running again
                    move_status(s, ctx.name, CampaignStatus.RUNNING, (CampaignStatus.BUDGET_EXHAUSTED,))
                ctx.store.event(ctx.name, "budget_raised" if amount >= Decimal(before) else "budget_lowered",
                                f"budget {shown(before, ctx.campaign.currency)} -> {shown(amount, ctx.campaign.currency)}", session=s)
        budget = Decimal(row.budget)
        # cleared only if it is still the budget adopted here: one set meanwhile waits for the next tick
        if wanted and ctx.store.swap_kv(ctx.name, Keys.BUDGET_SET, wanted, "", session=s):
            ctx.store.set_kv(ctx.name, Keys.BUDGET_BLOCKED, "", session=s)
    if ctx.campaign.budget != budget:
        ctx.campaign = dataclasses.replace(ctx.campaign, budget=budget)


def _committed(ctx: Context, s: Session, budget: Decimal) -> Decimal:
    t = totals(s, ctx.name, budget)
    return t.spent + t.reserved


def exhaust_if_drained(ctx: Context) -> bool:
    """Posting is blocked and no posted HIT is left open: write the scores so far, end `budget_exhausted`."""
    if not ctx.store.get_kv(ctx.name, Keys.BUDGET_BLOCKED, ""):
        return False
    if not studies_over(ctx):  # a study still open (Prolific): stopped and settled first, by the studies step
        return False
    with ctx.store.session() as s:
        camp = get_row(s, CampaignRow, ctx.name)
        if camp.status != CampaignStatus.RUNNING:
            return False
        open_hits = s.exec(select(func.count()).select_from(HitRow).where(
            HitRow.campaign == ctx.name, col(HitRow.status).in_((HitStatus.POSTING, HitStatus.POSTED)))).one()
        if open_hits:
            return False
        draft = s.exec(select(HitRow).where(HitRow.campaign == ctx.name, HitRow.status == HitStatus.DRAFT)
                       .order_by(col(HitRow.id))).first()
        t = totals(s, ctx.name, ctx.campaign.budget)
        if draft is not None and t.spent + t.reserved + fees_of(ctx.market).hit_reserve(Decimal(draft.reward), draft.assignments) <= t.budget:
            return False  # money came back (rejections, unfilled slots): the next tick posts it
        stages_with_work = [st.stage for st in s.exec(select(HitRow).where(
            HitRow.campaign == ctx.name, HitRow.status == HitStatus.CLOSED)).all()]
    done = [st for st in ctx.campaign.stages if st.name in stages_with_work]
    written = ""
    n_rows = 0
    if done:
        stage = done[-1]  # the furthest stage that got any work
        export = get_kind(stage.kind).export(stage, ctx.data)
        out = ctx.out_dir()
        csv_path, _ = write_scores(out, export.rows, export.columns)
        for name, text in sorted(export.files.items()):
            atomic_write(out / name, text)
        written = f"; scores over what was collected ({len(export.rows)} items, stage {stage.name}) written to {csv_path}"
        n_rows = len(export.rows)
    with ctx.store.session() as s:
        # only if still running: a `cancel` or `pause` made while the scores were written stands
        if not move_status(s, ctx.name, CampaignStatus.BUDGET_EXHAUSTED, (CampaignStatus.RUNNING,),
                           finished_at=ctx.clock.now()):
            return False
        ctx.store.event(ctx.name, CampaignStatus.BUDGET_EXHAUSTED, f"budget {shown(ctx.campaign.budget, ctx.campaign.currency)} exhausted: {shown(t.spent, ctx.campaign.currency)} spent, "
                        f"no HIT left open{written}. Raise it with `campaign budget {ctx.name} --set AMOUNT`.",
                        level="warning", session=s)
    log.warning("campaign %s: budget exhausted (%d items scored)", ctx.name, n_rows)
    return True
