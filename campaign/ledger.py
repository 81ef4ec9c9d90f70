"""The ledger: every cent a campaign may spend, reserved before it can be spent.

A HIT's worst case (reward + fee for every assignment) is reserved in the same transaction that records
the intent to post it, so the budget is checked against reservations and cannot be overrun even if the
process dies between the reservation and the remote call. Approval turns one assignment's share into a
charge; rejection and expiry release what will never be paid. Every entry has a unique `ref`, so an
action replayed after a crash books nothing twice.

What a HIT, an assignment or a bonus costs is the marketplace's fee schedule (`fees`, MTurk's by
default; `campaign.marketplaces.base.fees_of`). A marketplace that is paid per place of a study
(Prolific) reserves places before it opens them (`reserve_places`), charges a place when its
submission is approved (`charge_place`) and releases the places never paid once the study is over
(`release_study_rest`); its HITs themselves cost nothing, and nothing is booked for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from campaign.money import MTURK_FEES, Cost, MTurkFees, fmt, shown
from campaign.state import LedgerKind
from campaign.store import LedgerRow

if TYPE_CHECKING:
    from campaign.marketplaces.base import FeeSchedule

ZERO = Decimal("0.00")


class BudgetExceeded(Exception):
    pass


@dataclass(frozen=True)
class Totals:
    reserved: Decimal
    spent: Decimal
    fees: Decimal
    budget: Decimal

    @property
    def remaining(self) -> Decimal:
        return self.budget - self.spent - self.reserved


def totals(session: Session, campaign: str, budget: Decimal) -> Totals:
    # grouped by amount in SQL (there are few distinct amounts), summed exactly as Decimal here:
    # SQL's SUM over text would go through floating point
    rows = session.exec(
        select(LedgerRow.kind, LedgerRow.amount, LedgerRow.fee, func.count())
        .where(LedgerRow.campaign == campaign).group_by(LedgerRow.kind, LedgerRow.amount, LedgerRow.fee)
    ).all()
    reserved = spent = fees = ZERO
    for kind, amount, fee_each, n in rows:
        a = Decimal(amount) * n
        fee = Decimal(fee_each) * n
        if kind in (LedgerKind.RESERVE, LedgerKind.BONUS_RESERVE):
            reserved += a
        elif kind in (LedgerKind.CHARGE, LedgerKind.BONUS_CHARGE):
            reserved -= a
            spent += a
            fees += fee
        elif kind in (LedgerKind.RELEASE, LedgerKind.BONUS_RELEASE):
            reserved -= a
    return Totals(reserved=reserved, spent=spent, fees=fees, budget=budget)


def _book(session: Session, row: LedgerRow) -> bool:
    """Insert unless an entry with the same ref exists; True when booked now."""
    exists = session.exec(select(LedgerRow.id).where(LedgerRow.campaign == row.campaign, LedgerRow.ref == row.ref)).first()
    if exists is not None:
        return False
    try:
        with session.begin_nested():  # a savepoint: a duplicate undoes only this entry
            session.add(row)
    except IntegrityError:  # a concurrent writer booked it first
        return False
    return True


def book_many(session: Session, rows: list[LedgerRow]) -> int:
    """`_book` for many entries at once: one query for the refs already booked and one savepoint for the
    rest, so a chunk of decisions costs a few statements rather than three per entry (at 47,000
    assignments the per-entry savepoints were a large part of review). A duplicate booked concurrently
    undoes the savepoint, and the entries are then booked one by one. Returns how many were booked."""
    if not rows:
        return 0
    by_campaign: dict[str, set[str]] = {}
    for r in rows:
        by_campaign.setdefault(r.campaign, set()).add(r.ref)
    known: set[tuple[str, str]] = set()
    for camp, refs in by_campaign.items():
        known |= {(camp, ref) for ref in session.exec(select(LedgerRow.ref).where(
            LedgerRow.campaign == camp, col(LedgerRow.ref).in_(refs))).all()}
    fresh: list[LedgerRow] = []
    for r in rows:
        if (r.campaign, r.ref) not in known:
            known.add((r.campaign, r.ref))
            fresh.append(r)
    if not fresh:
        return 0
    try:
        with session.begin_nested():
            session.add_all(fresh)
    except IntegrityError:  # a concurrent writer booked one of them first
        return sum(_book(session, LedgerRow(**{k: getattr(r, k) for k in LedgerRow.model_fields if k != "id"}))
                   for r in fresh)
    return len(fresh)


def charge_row(campaign: str, hit_key: str, assignment_id: str, reward: Decimal, assignments: int,
               fees: FeeSchedule | MTurkFees = MTURK_FEES) -> LedgerRow | None:
    """The entry `charge_assignment` books (for `book_many`); None when the assignment costs nothing."""
    cost = fees.assignment(reward, assignments)
    if cost.total <= 0:
        return None
    return LedgerRow(campaign=campaign, ref=f"charge:{assignment_id}", kind=LedgerKind.CHARGE, amount=fmt(cost.total),
                     fee=fmt(cost.fee), hit_key=hit_key, assignment_id=assignment_id)


def release_row(campaign: str, hit_key: str, assignment_id: str, reward: Decimal, assignments: int,
                fees: FeeSchedule | MTurkFees = MTURK_FEES) -> LedgerRow | None:
    """The entry `release_assignment` books (for `book_many`); None when the assignment costs nothing."""
    cost = fees.assignment(reward, assignments)
    if cost.total <= 0:
        return None
    return LedgerRow(campaign=campaign, ref=f"release:{assignment_id}", kind=LedgerKind.RELEASE, amount=fmt(cost.total),
                     hit_key=hit_key, assignment_id=assignment_id)


def reserve_hits(session: Session, campaign: str, budget: Decimal, hits: list[tuple[str, Decimal, int]],
                 fees: FeeSchedule | MTurkFees = MTURK_FEES) -> tuple[dict[str, Decimal], BudgetExceeded | None]:
    """`reserve_hit` for several HITs (hit key, reward, assignments), in order, with the ledger's totals
    read once: reading them per HIT scanned the whole ledger for every HIT posted, which made posting
    quadratic in the campaign's size. Stops at the first HIT the budget cannot cover and returns it
    as the error; returns the amounts reserved by HIT key."""
    out: dict[str, Decimal] = {}
    if not hits:
        return out, None
    refs = {f"reserve:{key}" for key, _, _ in hits}
    booked = set(session.exec(select(LedgerRow.ref).where(LedgerRow.campaign == campaign, col(LedgerRow.ref).in_(refs))).all())
    t = totals(session, campaign, budget)
    used = t.spent + t.reserved
    rows: list[LedgerRow] = []
    for key, reward, assignments in hits:
        amount = fees.hit_reserve(reward, assignments)
        ref = f"reserve:{key}"
        if amount > 0 and ref not in booked:  # <= 0: paid some other way (per place of a study), nothing to book
            if used + amount > budget:
                book_many(session, rows)
                return out, BudgetExceeded(
                    f"posting {key} needs {shown(amount, fees.currency)} but only {shown(budget - used, fees.currency)} "
                    f"of the {shown(budget, fees.currency)} budget is left")
            used += amount
            booked.add(ref)
            rows.append(LedgerRow(campaign=campaign, ref=ref, kind=LedgerKind.RESERVE, amount=fmt(amount), hit_key=key))
        out[key] = amount
    book_many(session, rows)
    return out, None


def reserve_hit(session: Session, campaign: str, budget: Decimal, hit_key: str, reward: Decimal, assignments: int,
                fees: FeeSchedule | MTurkFees = MTURK_FEES) -> Decimal:
    """Reserve a HIT's worst-case cost, or raise BudgetExceeded; idempotent per HIT key."""
    amount = fees.hit_reserve(reward, assignments)
    ref = f"reserve:{hit_key}"
    if amount <= 0:  # paid some other way (per place of a study): nothing to book
        return amount
    if session.exec(select(LedgerRow.id).where(LedgerRow.campaign == campaign, LedgerRow.ref == ref)).first() is not None:
        return amount
    t = totals(session, campaign, budget)
    if t.spent + t.reserved + amount > budget:
        raise BudgetExceeded(
            f"posting {hit_key} needs {shown(amount, fees.currency)} but only {shown(t.remaining, fees.currency)} "
            f"of the {shown(budget, fees.currency)} budget is left"
        )
    _book(session, LedgerRow(campaign=campaign, ref=ref, kind=LedgerKind.RESERVE, amount=fmt(amount), hit_key=hit_key))
    return amount


def charge_assignment(session: Session, campaign: str, hit_key: str, assignment_id: str, reward: Decimal, assignments: int,
                      fees: FeeSchedule | MTurkFees = MTURK_FEES) -> bool:
    """Book an approved assignment (reward + fee), exactly once."""
    row = charge_row(campaign, hit_key, assignment_id, reward, assignments, fees)
    return row is not None and _book(session, row)


def release_assignment(session: Session, campaign: str, hit_key: str, assignment_id: str, reward: Decimal, assignments: int,
                       fees: FeeSchedule | MTurkFees = MTURK_FEES) -> bool:
    """A rejected assignment will never be paid: release its share of the reservation."""
    row = release_row(campaign, hit_key, assignment_id, reward, assignments, fees)
    return row is not None and _book(session, row)


def release_hit_rest(session: Session, campaign: str, hit_key: str, keep: Decimal = ZERO) -> Decimal:
    """When a HIT closes (done, expired, cancelled, failed), release whatever of its reservation is left
    but `keep`: the shares of work held for the operator, charged or released when it is settled."""
    rows = session.exec(select(LedgerRow.kind, LedgerRow.amount).where(LedgerRow.campaign == campaign, LedgerRow.hit_key == hit_key)).all()
    left = -keep
    for kind, amount in rows:
        if kind == LedgerKind.RESERVE:
            left += Decimal(amount)
        elif kind in (LedgerKind.CHARGE, LedgerKind.RELEASE):
            left -= Decimal(amount)
    if left <= 0:
        return ZERO
    booked = _book(session, LedgerRow(campaign=campaign, ref=f"release:{hit_key}:rest", kind=LedgerKind.RELEASE, amount=fmt(left),
                                      hit_key=hit_key, note="closing the HIT"))
    return left if booked else ZERO


def reserve_bonus(session: Session, campaign: str, budget: Decimal, ref: str, amount: Decimal, assignment_id: str,
                  fees: FeeSchedule | MTurkFees = MTURK_FEES) -> Decimal:
    total = fees.bonus(amount).total
    if session.exec(select(LedgerRow.id).where(LedgerRow.campaign == campaign, LedgerRow.ref == f"bonus_reserve:{ref}")).first():
        return total
    t = totals(session, campaign, budget)
    if t.spent + t.reserved + total > budget:
        c = fees.currency
        raise BudgetExceeded(f"a {shown(amount, c)} bonus needs {shown(total, c)} with fees; only {shown(t.remaining, c)} left")
    _book(session, LedgerRow(campaign=campaign, ref=f"bonus_reserve:{ref}", kind=LedgerKind.BONUS_RESERVE, amount=fmt(total), assignment_id=assignment_id))
    return total


def charge_bonus(session: Session, campaign: str, ref: str, amount: Decimal, assignment_id: str,
                 fees: FeeSchedule | MTurkFees = MTURK_FEES) -> bool:
    cost = fees.bonus(amount)
    return _book(session, LedgerRow(campaign=campaign, ref=f"bonus_charge:{ref}", kind=LedgerKind.BONUS_CHARGE,
                                    amount=fmt(cost.total), fee=fmt(cost.fee), assignment_id=assignment_id))


def spent_count(session: Session, campaign: str) -> int:
    return int(session.exec(select(func.count()).select_from(LedgerRow).where(LedgerRow.campaign == campaign, LedgerRow.kind == LedgerKind.CHARGE)).one())


def release_bonus(session: Session, campaign: str, ref: str, amount: Decimal, assignment_id: str,
                  fees: FeeSchedule | MTurkFees = MTURK_FEES) -> bool:
    """A bonus that the marketplace refused will not be paid: free its reservation."""
    return _book(session, LedgerRow(campaign=campaign, ref=f"bonus_release:{ref}", kind=LedgerKind.BONUS_RELEASE,
                                    amount=fmt(fees.bonus(amount).total), assignment_id=assignment_id))


# -- places of a study (Prolific) ----------------------------------------------------------------------------------
def _study_ref(key: str) -> str:
    return f"study:{key}"


def places_reserved(session: Session, campaign: str, key: str) -> int:
    return int(session.exec(select(func.count()).select_from(LedgerRow).where(
        LedgerRow.campaign == campaign, LedgerRow.hit_key == _study_ref(key), LedgerRow.kind == LedgerKind.RESERVE)).one())


def reserve_places(session: Session, campaign: str, budget: Decimal, key: str, places: int, cost: Cost) -> tuple[int, str]:
    """Reserve one place's cost for each place of study `key` up to `places` (those reserved before
    count). Returns how many are reserved now, and why not more when that is fewer than `places`
    (the budget: the places that fit are booked, the rest never opened)."""
    have = places_reserved(session, campaign, key)
    t = totals(session, campaign, budget)
    left = t.budget - t.spent - t.reserved
    for n in range(have + 1, places + 1):
        if cost.total > left:
            return have, (f"opening place {n} of study {key} needs {fmt(cost.total)} but only {fmt(left)} of the "
                          f"{fmt(budget)} budget is left")
        _book(session, LedgerRow(campaign=campaign, ref=f"reserve:{_study_ref(key)}:{n}", kind=LedgerKind.RESERVE,
                                 amount=fmt(cost.total), hit_key=_study_ref(key), note=f"place {n}"))
        left -= cost.total
        have = n
    return have, ""


def charge_place(session: Session, campaign: str, key: str, submission_id: str, cost: Cost) -> bool:
    """An approved submission: its place's reservation becomes spent, exactly once per submission."""
    return _book(session, LedgerRow(campaign=campaign, ref=f"charge:{submission_id}", kind=LedgerKind.CHARGE, amount=fmt(cost.total),
                                    fee=fmt(cost.fee), hit_key=_study_ref(key), assignment_id=submission_id))


def reserve_work(session: Session, campaign: str, budget: Decimal, key: str, submission_id: str, cost: Cost,
                 currency: str) -> None:
    """Reserve the pay a returned or timed-out submission is owed for its used work (its place reopened
    for someone else, so the place's own reservation still stands), or raise BudgetExceeded; once per
    submission, under the study, so `charge_place` draws on it and `release_study_rest` sees it."""
    ref = f"reserve:work:{submission_id}"
    if session.exec(select(LedgerRow.id).where(LedgerRow.campaign == campaign, LedgerRow.ref == ref)).first() is not None:
        return
    t = totals(session, campaign, budget)
    if t.spent + t.reserved + cost.total > budget:
        raise BudgetExceeded(f"the work of submission {submission_id} needs {shown(cost.total, currency)} but only "
                             f"{shown(t.remaining, currency)} of the budget is left")
    _book(session, LedgerRow(campaign=campaign, ref=ref, kind=LedgerKind.RESERVE, amount=fmt(cost.total),
                             hit_key=_study_ref(key), assignment_id=submission_id, note="work of a returned place"))


def release_study_rest(session: Session, campaign: str, key: str) -> Decimal:
    """The study is over: release what its places reserved and no approval charged."""
    rows = session.exec(select(LedgerRow.kind, LedgerRow.amount).where(LedgerRow.campaign == campaign,
                                                                        LedgerRow.hit_key == _study_ref(key))).all()
    left, units = ZERO, 0
    for kind, amount in rows:
        if kind == LedgerKind.RESERVE:
            left += Decimal(amount)
            units += 1
        elif kind in (LedgerKind.CHARGE, LedgerKind.RELEASE):
            left -= Decimal(amount)
    if left <= 0:
        return ZERO
    booked = _book(session, LedgerRow(campaign=campaign, ref=f"release:{_study_ref(key)}:rest:{units}", kind=LedgerKind.RELEASE,
                                      amount=fmt(left), hit_key=_study_ref(key), note="study over"))
    return left if booked else ZERO


def reserve_extra(session: Session, campaign: str, budget: Decimal, hit_key: str, round_: int, reward: Decimal,
                  count: int, fees: FeeSchedule | MTurkFees = MTURK_FEES) -> Decimal:
    """Reserve `count` more slots of a posted HIT (`campaign.steps.replace`), or raise BudgetExceeded;
    idempotent per (HIT, round). Booked under the HIT's key, so the HIT's charges draw on it and
    `release_hit_rest` frees what is left when the HIT closes."""
    amount = fees.hit_reserve(reward, count)
    ref = f"reserve:{hit_key}:extra-{round_}"
    if amount <= 0:
        return amount
    if session.exec(select(LedgerRow.id).where(LedgerRow.campaign == campaign, LedgerRow.ref == ref)).first() is not None:
        return amount
    t = totals(session, campaign, budget)
    if t.spent + t.reserved + amount > budget:
        raise BudgetExceeded(f"replacing {count} answer(s) of {hit_key} needs {shown(amount, fees.currency)} but only "
                             f"{shown(t.remaining, fees.currency)} of the budget is left")
    _book(session, LedgerRow(campaign=campaign, ref=ref, kind=LedgerKind.RESERVE, amount=fmt(amount), hit_key=hit_key,
                             note="replacing refused answers"))
    return amount


def release_extra(session: Session, campaign: str, hit_key: str, round_: int, amount: Decimal) -> bool:
    """Undo `reserve_extra` when the marketplace refused the slots (booked once)."""
    return _book(session, LedgerRow(campaign=campaign, ref=f"release:{hit_key}:extra-{round_}", kind=LedgerKind.RELEASE,
                                    amount=fmt(amount), hit_key=hit_key, note="replacement refused"))
