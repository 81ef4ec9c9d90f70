"""Replacing refused answers, for task kinds that need every answer (`TaskKind.replace_refused`:
nuggets): a HIT whose answers were rejected (invalid, or spam on two kinds of
evidence), or, for a kind that needs every answer (`TaskKind.replace_excluded`: nuggets), excluded by
quality control (approved and paid, but left out of the scores), would otherwise end with fewer
counted answers than its stage asks for, and a task that needs
several workers to agree (nuggets: three on the same span) loses what those slots would have found.

Once every slot of a posted, unexpired HIT is decided and fewer than the stage's `assignments` are
approved and counted, the marketplace is asked for the missing slots again (`AdditionalAssignments`; MTurk's
CreateAdditionalAssignmentsForHIT), bounded: at most `MAX_EXTRA_SHARE` of the HIT's first assignments
over its life, never taking a HIT under 10 assignments to 10 or more (MTurk refuses that), and within
the budget. With `quality.replace_excluded` every stage asks, whatever its kind: answers rejected or
left out by quality control are asked for again within the same bounds. A marketplace that cannot add
slots does not declare the capability and nothing is asked. On Prolific (`ProlificMarketplace.add_assignments`)
the slots are added to the HIT on the task site; the places they need are then reserved in the ledger
and opened by the `places` step (`campaign.steps.studies.open_places`), like the first ones, so the
replacement's own reservation is nothing (`ProlificFees.hit_reserve`) and a place is charged once, when
its submission is approved.

Crash-safe like posting (`campaign.steps.post`): the intent (round, count, state `asking`), the extra
reservation (ledger ref `reserve:<hit>:extra-<round>`, under the HIT's key) and the HIT's raised slot
count are written in one transaction before the call; the call carries a deterministic
UniqueRequestToken (`<hit token>-extra-<round>`), so repeating it after a crash adds nothing
(`AlreadyDone`); then the state becomes `asked`. A refusal releases that round's reservation and lowers
the slot count again. Each slot is paid only when its own assignment is approved, so nothing is paid
twice; `release_hit_rest` frees what is left of every reservation when the HIT closes.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from sqlmodel import col, func, select

from campaign.ledger import BudgetExceeded, release_extra, reserve_extra, totals
from campaign.marketplaces.base import AdditionalAssignments, AlreadyDone, MarketError, Studies, TransientError, fees_of
from campaign.money import fmt
from campaign.plan.extra import plan_extra
from campaign.state import AssignmentStatus, HitStatus, Keys, ReplaceState
from campaign.steps.context import Context, get_row, remote_id
from campaign.store import AssignmentRow, HitRow, JudgmentRow
from campaign.tasks import get as get_kind


def replace_refused(ctx: Context) -> int:
    """Ask for replacements of refused answers on every HIT that needs them (module docstring); returns
    how many slots were added."""
    market = ctx.market
    if not isinstance(market, AdditionalAssignments):
        return 0
    stages = {s.name: s for s in ctx.campaign.stages}
    # only stages that ask for replacements: the others never ask, so they have no round to resume
    # either; reading every posted HIT of a Likert campaign (and a kv row per HIT) every pass to skip each
    # one was the slowest step of a pass at 47,000 propositions (p50 2.8 s)
    replacing = [name for name, st in stages.items() if replaces(ctx, market, st.kind)]
    if not replacing:
        return 0
    first_of = {s.name: s.assignments for s in ctx.campaign.stages}
    now = ctx.clock.now()
    with ctx.store.session() as s:
        hits = s.exec(select(HitRow).where(HitRow.campaign == ctx.name, HitRow.status == HitStatus.POSTED,
                                           col(HitRow.stage).in_(replacing))).all()
        counts: dict[str, dict[str, int]] = {}
        keys = [h.hit_key for h in hits]
        for i in range(0, len(keys), 500):
            for hk, st, n in s.exec(select(AssignmentRow.hit_key, AssignmentRow.status, func.count()).where(
                    AssignmentRow.campaign == ctx.name, col(AssignmentRow.hit_key).in_(keys[i:i + 500]))
                    .group_by(AssignmentRow.hit_key, AssignmentRow.status)).all():
                counts.setdefault(hk, {})[st] = n
            # approved answers that still count: quality control has not left all of their labels out
            for hk, n in s.exec(select(AssignmentRow.hit_key, func.count(func.distinct(AssignmentRow.assignment_id))).join(
                    JudgmentRow, col(JudgmentRow.assignment_id) == col(AssignmentRow.assignment_id)).where(
                    AssignmentRow.campaign == ctx.name, col(AssignmentRow.hit_key).in_(keys[i:i + 500]),
                    AssignmentRow.status == AssignmentStatus.APPROVED, JudgmentRow.excluded == False)  # noqa: E712
                    .group_by(AssignmentRow.hit_key)).all():
                counts.setdefault(hk, {})["counted"] = n
    added = 0
    for hit in hits:
        saved = ctx.store.get_kv(ctx.name, Keys.replace(hit.hit_key))
        state: dict[str, Any] = json.loads(saved) if saved else {"round": 0, "state": ReplaceState.ASKED, "count": 0}
        if state["state"] == ReplaceState.ASKING:  # interrupted between intent and record: the same call again
            added += _call(ctx, market, hit, state["round"], state["count"])
            continue
        if state["state"] == ReplaceState.REFUSED:  # the marketplace said no once: not asked again every pass
            continue
        if hit.expires_at is not None and hit.expires_at <= now:
            continue
        c = counts.get(hit.hit_key, {})
        decided = c.get(AssignmentStatus.APPROVED, 0) + c.get(AssignmentStatus.REJECTED, 0)
        open_ = sum(n for st, n in c.items() if st not in (AssignmentStatus.APPROVED, AssignmentStatus.REJECTED, "counted"))
        first = first_of.get(hit.stage, hit.assignments)
        stage = stages.get(hit.stage)
        if stage is None or not replaces(ctx, market, stage.kind):  # a kind that does with fewer answers
            continue
        counted = (c.get("counted", 0) if get_kind(stage.kind).replace_excluded or ctx.campaign.quality.replace_excluded
                   else c.get(AssignmentStatus.APPROVED, 0))
        n = plan_extra(first, hit.assignments, decided, counted, open_)
        if n <= 0:
            continue
        round_ = state["round"] + 1
        short = _places_short(ctx, market, n)
        if short:  # the places could never be opened: the HIT would wait out its lifetime for them
            ctx.store.event(ctx.name, "replacement_skipped", f"{hit.hit_key}: {short}", subject=hit.hit_key)
            continue
        with ctx.store.session() as s:
            try:
                reserve_extra(s, ctx.name, ctx.campaign.budget, hit.hit_key, round_, Decimal(hit.reward), n, fees_of(market))
            except BudgetExceeded as exc:
                ctx.store.event(ctx.name, "replacement_skipped", f"{hit.hit_key}: {exc}", subject=hit.hit_key, session=s)
                continue
            row = get_row(s, HitRow, hit.id)
            row.assignments += n
            s.add(row)
            ctx.store.set_kv(ctx.name, Keys.replace(hit.hit_key), json.dumps({"round": round_, "state": ReplaceState.ASKING, "count": n}), session=s)
        added += _call(ctx, market, hit, round_, n)
    return added


def replaces(ctx: Context, market: object, kind: str) -> bool:
    """Whether a stage of task kind `kind` asks for replacements: every stage when the spec says so
    (`quality.replace_excluded`: rejected answers and those quality control left out), else a kind that
    needs every answer (nuggets) on a marketplace whose slots are paid one by one. A study's places
    (Prolific) are paid per place, which the estimate prices without replacements, so there only the
    spec's switch asks for them."""
    if ctx.campaign.quality.replace_excluded:
        return True
    return get_kind(kind).replace_refused and not isinstance(market, Studies)


def _places_short(ctx: Context, market: object, n: int) -> str:
    """On a marketplace with studies, why the budget cannot cover `n` more slots at a place each (their
    worst case: the places are reserved, and the budget enforced, by `steps.studies.open_places`, which
    never opens one the budget cannot cover); "" when it can, or elsewhere."""
    if not isinstance(market, Studies):
        return ""
    need = market.place_cost().total * n
    with ctx.store.session() as s:
        left = totals(s, ctx.name, ctx.campaign.budget).remaining
    return "" if need <= left else f"{n} more place(s) would need {fmt(need)} but only {fmt(left)} of the budget is left"


def _call(ctx: Context, market: AdditionalAssignments, hit: HitRow, round_: int, n: int) -> int:
    """The remote call of one round, then its record; a refusal undoes the round's intent."""
    try:
        market.add_assignments(remote_id(hit), n, f"{hit.token}-extra-{round_}")
    except AlreadyDone:
        pass  # the call before a crash went through
    except TransientError:
        return 0  # the intent stays `asking`: the same call next pass
    except MarketError as exc:
        with ctx.store.session() as s:
            row = get_row(s, HitRow, hit.id)
            row.assignments -= n
            s.add(row)
            release_extra(s, ctx.name, hit.hit_key, round_, fees_of(market).hit_reserve(Decimal(hit.reward), n))
            ctx.store.set_kv(ctx.name, Keys.replace(hit.hit_key), json.dumps({"round": round_, "state": ReplaceState.REFUSED, "count": 0}), session=s)
            ctx.store.event(ctx.name, "replacement_refused", f"{hit.hit_key}: {exc}", subject=hit.hit_key, session=s)
        return 0
    with ctx.store.session() as s:
        ctx.store.set_kv(ctx.name, Keys.replace(hit.hit_key), json.dumps({"round": round_, "state": ReplaceState.ASKED, "count": n}), session=s)
        ctx.store.event(ctx.name, "replacements", f"{hit.hit_key}: {n} more slot(s) for refused answers (round {round_})",
                        subject=hit.hit_key, session=s)
    return n
