"""A pilot on Prolific (`prolific.pilot: N`): the first N places run, then the campaign pauses with a
summary for the researcher to read before `campaign resume` runs the rest.

While the pilot runs, `open_places` opens at most N places in all (`pilot_cap`). Once N submissions are
decided (approved or rejected) and none is still taking a place or awaiting review, `pilot_pause`
writes the summary (an event of kind `pilot`, also shown by `campaign status`): the median time taken,
the effective hourly pay at that median, the attention checks seen and failed, the submissions that
left without finishing, and the rejections by category. It records that the pilot is over (a
store key, so it happens once, whatever restarts) and moves the campaign to `paused` (the status `pause`
sets: nothing new is posted, opened or reviewed; what was approved is still charged, owed work still
paid). `campaign resume` sets it running again and the rest runs as without a pilot: the places already
paid are submissions on Prolific, decided and charged once (the ledger's ref is the submission id).
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from sqlmodel import col, func, select

from campaign.money import shown
from campaign.prolific.checks import REJECTED_EVENT, duration_text
from campaign.prolific.study import reward_per_submission
from campaign.state import CampaignStatus
from campaign.steps.context import Context
from campaign.store import EventRow, ProlificDecisionRow, move_status

PILOT_KEY = "prolific:pilot"  # "over" once the pilot's summary was given (the campaign paused once)
PILOT_EVENT = "pilot"
DECIDED = ("APPROVED", "REJECTED")
PENDING = ("RESERVED", "ACTIVE", "AWAITING REVIEW", "PROCESSING")
LEFT = ("RETURNED", "TIMED-OUT")


def pilot_cap(ctx: Context) -> int | None:
    """Places the campaign may open in all while its pilot runs; None: no pilot, or it is over."""
    cfg = ctx.campaign.prolific
    if cfg is None or cfg.pilot is None or ctx.store.get_kv(ctx.name, PILOT_KEY, ""):
        return None
    return int(cfg.pilot)


def summary(facts: list[dict[str, Any]], categories: Counter[str], reward: Decimal, currency: str,
            estimated_minutes: int) -> tuple[str, dict[str, Any]]:
    """The pilot's summary line and its figures, from each submission's facts
    (`ProlificMarketplace.submission_facts`) and the rejections made, by category."""
    decided = [f for f in facts if f["status"] in DECIDED]
    times = [float(f["seconds"]) for f in decided if f.get("seconds") is not None]
    median = statistics.median(times) if times else None
    hourly = (reward * 3600 / Decimal(str(median))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP) if median else None
    seen = sum(int(f.get("checks_seen") or 0) for f in facts)
    failed = sum(int(f.get("checks_failed") or 0) for f in facts)
    failing = sum(1 for f in facts if int(f.get("checks_failed") or 0) > 0)
    left = sum(1 for f in facts if f["status"] in LEFT)
    figures = {"places": len(decided), "approved": sum(1 for f in decided if f["status"] == "APPROVED"),
               "rejected": sum(1 for f in decided if f["status"] == "REJECTED"), "returned_or_timed_out": left,
               "median_seconds": median, "hourly_pay": None if hourly is None else str(hourly), "currency": currency,
               "checks_seen": seen, "checks_failed": failed, "submissions_failing_a_check": failing,
               "rejections": dict(sorted(categories.items()))}
    time_text = (f"median time {duration_text(median)} (estimated {estimated_minutes} min)" if median is not None
                 else "no completed submission timed")
    pay_text = (f"{shown(hourly, currency)} an hour at the median ({shown(reward, currency)} a place)" if hourly is not None
                else "no hourly figure (no time taken)")
    rejections = ", ".join(f"{k} {v}" for k, v in sorted(categories.items())) or "none"
    line = (f"pilot done: {figures['places']} places decided ({figures['approved']} approved, {figures['rejected']} rejected, "
            f"{left} returned or timed out); {time_text}; pay {pay_text}; attention checks: {failed} of {seen} failed, "
            f"{failing} submissions failed at least one; rejections: {rejections}")
    return line, figures


def pilot_pause(ctx: Context) -> bool:
    """Pause the campaign with the pilot's summary once its places are decided; True when paused now."""
    cap = pilot_cap(ctx)
    facts_of = getattr(ctx.market, "submission_facts", None)
    if cap is None or facts_of is None:
        return False
    with ctx.store.session() as s:  # the journal first: no call to Prolific before enough decisions were sent
        sent = int(s.exec(select(func.count()).select_from(ProlificDecisionRow)
                          .where(ProlificDecisionRow.campaign == ctx.name)).one())
    if sent < cap:
        return False
    facts = facts_of()
    if sum(1 for f in facts if f["status"] in DECIDED) < cap or any(f["status"] in PENDING for f in facts):
        return False
    cfg = ctx.campaign.prolific
    assert cfg is not None
    with ctx.store.session() as s:
        data = s.exec(select(EventRow.data).where(EventRow.campaign == ctx.name, EventRow.kind == REJECTED_EVENT,
                                                  col(EventRow.data).is_not(None))).all()
    categories: Counter[str] = Counter()
    for raw in data:
        try:
            categories[str(json.loads(raw or "{}").get("category"))] += 1
        except ValueError:
            continue
    line, figures = summary(facts, categories, reward_per_submission(cfg), cfg.currency, cfg.estimated_minutes)
    with ctx.store.session() as s:
        ctx.store.set_kv(ctx.name, PILOT_KEY, "over", session=s)
        move_status(s, ctx.name, CampaignStatus.PAUSED, (CampaignStatus.RUNNING,))
        ctx.store.event(ctx.name, PILOT_EVENT, f"{line}; paused: `campaign resume {ctx.name}` runs the rest",
                        data=figures, session=s)
    return True
