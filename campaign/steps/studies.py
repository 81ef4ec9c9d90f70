"""Studies: recruiting on a marketplace that pays per place of a study (`campaign.marketplaces.base.Studies`,
Prolific), with the money in the campaign's ledger.

Each pass, for a marketplace that implements `Studies` (the others skip these steps):

- `open_places` (after posting): the places the posted work needs are reserved in the ledger first
  (place cost: reward + fee + VAT), then opened on the marketplace; a place the budget cannot cover is
  never opened (one `budget_stop` event, as for HITs). The reservation is the intent: a crash after it
  and before the call leaves places reserved and not yet opened, which the next pass opens (the call
  sets an absolute number and is idempotent). A refusal the service will repeat (a 4xx other than
  429: a study it does not accept) moves the campaign to `blocked` with the service's message in an
  event: nothing is retried until `campaign resume`; throttling and outages are tried again next pass
  (the client backs off within a call).
- `settle_studies` (after review and closing): the marketplace sends every decision that is due (and
  repairs one a crash cut off between the task site and the marketplace); each approved submission is
  charged its place, once (the ledger's ref is the submission id), however and whenever it was
  approved, and each returned or timed-out submission the share of its used work (`StudySubmission.work`);
  when a stage is complete (or the campaign is being cancelled, or out of money with none of
  the stage's HITs open) its studies are stopped, and once none of their submissions can still be paid
  the places never paid are released.

- `reconcile_costs` (after bonuses, before finish): each study that is over is reconciled with the
  service: the ledger's booked spend for it against what the service says it charged (`ReconcilesCost`,
  Prolific's `GET /studies/{id}/cost/`); the figures are kept (`Keys.study_cost`, shown by `status`, the
  dashboard and the audit) and a difference is an event and an alert until it is gone. The service is
  asked again only when the ledger's figure changed or the last answer differed.

An account that cannot run the campaign as its spec says (`SetupRefused`: an unknown workspace, one that
pays in another currency) blocks the campaign the same way, before any study exists.

`finish` and the end for want of money wait for `study_state.studies_over`, so a campaign does not end with a study
still open (Prolific would auto-approve what came in later) or money still reserved for places.
"""

from __future__ import annotations

import json
import logging
from decimal import Decimal

from sqlmodel import col, select

from campaign.crash import crash_point
from campaign.ledger import BudgetExceeded, charge_place, release_study_rest, reserve_places, reserve_work
from campaign.marketplaces.base import (
    MarketError,
    PaymentUncertain,
    ReconcilesCost,
    SetupRefused,
    Studies,
    TransientError,
    UnservableWork,
    fees_of,
    work_key,
)
from campaign.money import Cost, fmt
from campaign.state import CampaignStatus, HeldKind, HitStatus, Keys, SubmissionStatus
from campaign.steps.budget import note_blocked
from campaign.steps.context import Context, get_row, remote_id
from campaign.steps.isolation import held_keys, hold, note_once
from campaign.steps.pilot import pilot_cap
from campaign.steps.stages import OPEN, stage_done
from campaign.steps.study_state import keys_by_stage
from campaign.store import CampaignRow, HitRow, move_status

log = logging.getLogger(__name__)
BLOCKED = CampaignStatus.BLOCKED  # a marketplace refused a change for good; `campaign resume` lifts it


def open_places(ctx: Context) -> int:
    """Reserve, then open, the places the posted work needs; returns how many places were opened now."""
    market = ctx.market
    if not isinstance(market, Studies):
        return 0
    try:
        wanted = market.places_wanted()
    except SetupRefused as exc:  # the account cannot run the campaign as specified: nothing was created
        block(ctx, f"Prolific account: {exc}")
        return 0
    except MarketError as exc:
        ctx.store.event(ctx.name, "marketplace_error", f"counting places: {exc}", level="warning")
        return 0
    try:
        cost = market.place_cost()
    except SetupRefused as exc:
        block(ctx, f"Prolific account: {exc}")
        return 0
    opened = 0
    cap = pilot_cap(ctx)
    for key, places in sorted(wanted.items()):
        if cap is not None:  # a pilot runs: no more places in all than it has (`campaign.steps.pilot`)
            others = sum(int(ctx.store.get_kv(ctx.name, Keys.study_places(k), "0") or 0) for k in wanted if k != key)
            places = min(places, max(0, cap - others))
        try:
            opened += _open(ctx, market, key, places, cost)
        except Exception as exc:  # this study only: the others still get their places (invariant 8)
            note_once(ctx, "places", key, exc)
    return opened


def _open(ctx: Context, market: Studies, key: str, places: int, cost: Cost) -> int:
    """Reserve, then open, one study's places; returns how many were opened now."""
    if ctx.store.get_kv(ctx.name, Keys.study_over(key), ""):
        return 0
    with ctx.store.session() as s:
        reserved, short = reserve_places(s, ctx.name, ctx.campaign.budget, key, places, cost)
    if short:
        note_blocked(ctx, short, key)
    before = int(ctx.store.get_kv(ctx.name, Keys.study_places(key), "0") or 0)
    if reserved <= before:
        return 0
    crash_point("places.before_call")
    try:
        now = market.refill(key, reserved)
    except TransientError as exc:  # throttled or unavailable: the client backed off already; next pass again
        ctx.store.event(ctx.name, "marketplace_error", f"opening places of study {key}: {exc}", level="warning", subject=key)
        return 0
    except MarketError as exc:  # the service refused the change: the same call would be refused again
        block(ctx, f"opening places of study {key}: {exc}", key)
        return 0
    crash_point("places.after_call")
    ctx.store.set_kv(ctx.name, Keys.study_places(key), str(now))
    # `now` is the study's places in all (Prolific's total_available_places counts the taken ones too), so
    # the event says both: "N places open" read as N free places while most were long taken
    ctx.store.event(ctx.name, "places", f"study {key}: {now - before} more place(s) opened, {now} in all "
                    f"({fmt(cost.total)} reserved each)", subject=key)
    return now - before


def give_up(ctx: Context) -> int:
    """Expire the posted HITs whose free slots nobody can take any more (`UnservableWork`: a study whose
    every eligible participant took part and may not be given them), instead of waiting out their
    lifetime; what they got is collected, reviewed and closed as for any expired HIT, and a batch-planned
    stage plans on from it. Returns how many HITs were expired now.

    Expiring is idempotent on the marketplace and moves no money. The intent is an event written before
    the call; the HIT's new expiry is written after it, so a crash in between leaves the store with the
    old expiry, and the next pass finds the work unservable again and expires it again."""
    market = ctx.market
    if not isinstance(market, UnservableWork):
        return 0
    try:
        dead = set(market.unservable())
    except MarketError as exc:
        ctx.store.event(ctx.name, "marketplace_error", f"finding work nobody can take: {exc}", level="warning")
        return 0
    if not dead:
        return 0
    now = ctx.clock.now()
    with ctx.store.session() as s:
        hits = [h for h in s.exec(select(HitRow).where(HitRow.campaign == ctx.name, HitRow.status == HitStatus.POSTED,
                                                       col(HitRow.hit_id).in_(sorted(dead)))).all()
                if h.expires_at is None or h.expires_at > now]
    done = 0
    for hit in hits:
        ctx.store.event(ctx.name, "giving_up", f"{hit.hit_key}: nobody who may still come can take its free slots; "
                        "expiring it now", subject=hit.hit_key)
        try:
            market.expire_hit(remote_id(hit), now)
        except MarketError as exc:
            ctx.store.event(ctx.name, "marketplace_error", f"expiring {hit.hit_key}: {exc}", level="warning", subject=hit.hit_key)
            continue
        with ctx.store.session() as s:
            row = get_row(s, HitRow, hit.id)
            row.expires_at = now
            s.add(row)
            ctx.store.event(ctx.name, "gave_up", f"{hit.hit_key}: expired with its free slots unfilled", subject=hit.hit_key, session=s)
        done += 1
    return done


def block(ctx: Context, reason: str, subject: str | None = None) -> None:
    """A marketplace refused a change for good (a 4xx other than 429): the campaign stops in `blocked`,
    which no step runs in, with the service's message in an event, until the researcher has fixed the
    cause and runs `campaign resume`; retrying the same call would only be refused again."""
    with ctx.store.session() as s:
        if not move_status(s, ctx.name, BLOCKED, (CampaignStatus.RUNNING, CampaignStatus.PAUSED)):
            return
        ctx.store.event(ctx.name, "blocked", f"blocked: {reason}; nothing is retried until `campaign resume {ctx.name}`",
                        level="error", subject=subject, session=s)


def _pay_work(ctx: Context, market: Studies, key: str, submission_id: str, amount: Decimal) -> bool:
    """Reserve, pay (a bonus, once) and charge what a returned or timed-out submission's used work is
    owed; True when charged now. Not paid while the budget cannot cover it (held, one event) or while a
    payment is not visible yet (next pass)."""
    fees = fees_of(market)
    cost = fees.bonus(amount)
    try:
        with ctx.store.session() as s:
            reserve_work(s, ctx.name, ctx.campaign.budget, key, submission_id, cost, fees.currency)
    except BudgetExceeded as exc:
        note_once(ctx, "work", submission_id, exc)
        return False
    try:
        cost = market.pay_work(key, submission_id, amount)
    except TransientError:
        return False
    except PaymentUncertain as exc:  # never paid again by the program: held for the researcher, one event
        hold(ctx, HeldKind.WORK, work_key(submission_id), "studies", f"{type(exc).__name__}: {exc}",  # no traceback: not our failure
             data={"study_key": key, "submission_id": submission_id, "amount": str(amount)})
        return False
    with ctx.store.session() as s:
        return charge_place(s, ctx.name, key, submission_id, cost)


def settle_studies(ctx: Context) -> int:
    """Send due decisions, charge approved places, stop finished studies and release what they did not
    spend; returns how many places were charged now."""
    market = ctx.market
    if not isinstance(market, Studies):
        return 0
    crash_point("studies.before_settle")
    try:
        subs = market.settle()
    except SetupRefused as exc:
        block(ctx, f"Prolific account: {exc}")
        return 0
    except MarketError as exc:
        ctx.store.event(ctx.name, "marketplace_error", f"settling submissions: {exc}", level="warning")
        return 0
    cost = market.place_cost()
    charged = 0
    with ctx.store.session() as s:
        for sub in subs:
            try:
                with s.begin_nested():  # one submission that fails undoes only its own entry
                    if sub.status == SubmissionStatus.APPROVED and charge_place(s, ctx.name, sub.key, sub.submission_id, cost):
                        charged += 1
            except Exception as exc:  # the others are still charged; this one is tried again next pass
                note_once(ctx, "studies", sub.submission_id, exc)
    uncertain = held_keys(ctx, HeldKind.WORK)  # the researcher's `paid`/`unpaid` is carried out by the decisions step
    for sub in subs:  # no ledger transaction is held open across the marketplace's call
        if sub.work is None or work_key(sub.submission_id) in uncertain:
            continue
        try:
            if _pay_work(ctx, market, sub.key, sub.submission_id, sub.work):
                charged += 1
        except Exception as exc:  # the others are still paid; this one is tried again next pass
            note_once(ctx, "studies", sub.submission_id, exc)
    with ctx.store.session() as s:
        row = s.get(CampaignRow, ctx.name)
        cancelling = row is not None and row.status == CampaignStatus.CANCELLING
        open_stages = set(s.exec(select(HitRow.stage).where(HitRow.campaign == ctx.name,
                                                            col(HitRow.status).in_(OPEN)).distinct()).all())
    blocked = bool(ctx.store.get_kv(ctx.name, Keys.BUDGET_BLOCKED, ""))
    for stage, keys in sorted(keys_by_stage(ctx).items()):
        todo = [k for k in sorted(keys) if not ctx.store.get_kv(ctx.name, Keys.study_over(k), "")]
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
                ctx.store.set_kv(ctx.name, Keys.study_over(key), "1", session=s)
                ctx.store.event(ctx.name, "study_over", f"study {key} ({stage}) stopped; {fmt(freed)} of unused places "
                                "released", subject=key, session=s)
    return charged


def reconcile_costs(ctx: Context) -> int:
    """Reconcile each finished study's booked spend with what the service charged for it; returns how many
    studies differ now. A difference is written as an error event once per pair of figures and kept
    under `Keys.study_cost` (the alerts show it while it stands), never silent."""
    market = ctx.market
    if not isinstance(market, Studies) or not isinstance(market, ReconcilesCost):
        return 0
    differ = 0
    for _stage, keys in sorted(keys_by_stage(ctx).items()):
        for key in sorted(keys):
            if not ctx.store.get_kv(ctx.name, Keys.study_over(key), ""):
                continue
            last = json.loads(ctx.store.get_kv(ctx.name, Keys.study_cost(key), "") or "{}")
            try:
                booked = market.booked(key)
                if last and last.get("booked") == fmt(booked) and last.get("booked") == last.get("charged"):
                    continue  # reconciled, and the ledger booked nothing for it since
                cost = market.study_cost(key)
            except MarketError as exc:
                ctx.store.event(ctx.name, "marketplace_error", f"reading the cost of study {key}: {exc}", level="warning",
                                subject=key)
                continue
            if cost is None:
                continue
            now = {"study": cost.study_id, "booked": fmt(cost.booked), "charged": fmt(cost.charged)}
            if now != last:
                ctx.store.set_kv(ctx.name, Keys.study_cost(key), json.dumps(now, sort_keys=True))
                if not cost.matches:
                    ctx.store.event(ctx.name, "cost_mismatch", cost_mismatch_text(key, now), level="error", subject=key,
                                    data=now)
                elif last and last.get("booked") != last.get("charged"):  # a difference that is gone
                    ctx.store.event(ctx.name, "cost_reconciled", f"study {key}: the ledger's {now['booked']} now equals "
                                    f"what the service charged", subject=key, data=now)
            differ += 0 if cost.matches else 1
            if not cost.matches and not ctx.store.get_kv(ctx.name, Keys.study_cost_wait(key), ""):
                ctx.store.set_kv(ctx.name, Keys.study_cost_wait(key), repr(ctx.clock.now()))
    return differ


def cost_mismatch_text(key: str, figures: dict[str, str]) -> str:
    """The message of a study whose ledger and service figures differ (the event's and the alert's)."""
    return (f"study {key} (Prolific {figures.get('study')}): the ledger booked {figures.get('booked')} but the service "
            f"charged {figures.get('charged')} (GET /studies/{{id}}/cost/)")
