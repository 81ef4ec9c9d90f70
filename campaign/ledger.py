"""The ledger: every cent a campaign may spend, reserved before it can be spent.

A HIT's worst case (reward + fee for every assignment) is reserved in the same transaction that records
the intent to post it, so the budget is checked against reservations and cannot be overrun even if the
process dies between the reservation and the remote call. Approval turns one assignment's share into a
charge; rejection and expiry release what will never be paid. Every entry has a unique `ref`, so an
action replayed after a crash books nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, func, select

from campaign.money import assignment_cost, assignment_fee, bonus_fee, fmt, hit_cost
from campaign.store import LedgerRow

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
        if kind in ("reserve", "bonus_reserve"):
            reserved += a
        elif kind in ("charge", "bonus_charge"):
            reserved -= a
            spent += a
            fees += fee
        elif kind in ("release", "bonus_release"):
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


def reserve_hit(session: Session, campaign: str, budget: Decimal, hit_key: str, reward: Decimal, assignments: int) -> Decimal:
    """Reserve a HIT's worst-case cost, or raise BudgetExceeded; idempotent per HIT key."""
    amount = hit_cost(reward, assignments)
    ref = f"reserve:{hit_key}"
    if session.exec(select(LedgerRow.id).where(LedgerRow.campaign == campaign, LedgerRow.ref == ref)).first() is not None:
        return amount
    t = totals(session, campaign, budget)
    if t.spent + t.reserved + amount > budget:
        raise BudgetExceeded(
            f"posting {hit_key} needs ${fmt(amount)} but only ${fmt(t.remaining)} of the ${fmt(budget)} budget is left"
        )
    _book(session, LedgerRow(campaign=campaign, ref=ref, kind="reserve", amount=fmt(amount), hit_key=hit_key))
    return amount


def charge_assignment(session: Session, campaign: str, hit_key: str, assignment_id: str, reward: Decimal, assignments: int) -> bool:
    """Book an approved assignment (reward + fee), exactly once."""
    cost = assignment_cost(reward, assignments)
    fee = assignment_fee(reward, assignments)
    return _book(session, LedgerRow(campaign=campaign, ref=f"charge:{assignment_id}", kind="charge", amount=fmt(cost),
                                    fee=fmt(fee), hit_key=hit_key, assignment_id=assignment_id))


def release_assignment(session: Session, campaign: str, hit_key: str, assignment_id: str, reward: Decimal, assignments: int) -> bool:
    """A rejected assignment will never be paid: release its share of the reservation."""
    cost = assignment_cost(reward, assignments)
    return _book(session, LedgerRow(campaign=campaign, ref=f"release:{assignment_id}", kind="release", amount=fmt(cost),
                                    hit_key=hit_key, assignment_id=assignment_id))


def release_hit_rest(session: Session, campaign: str, hit_key: str) -> Decimal:
    """When a HIT closes (done, expired, cancelled, failed), release whatever of its reservation is left."""
    rows = session.exec(select(LedgerRow.kind, LedgerRow.amount).where(LedgerRow.campaign == campaign, LedgerRow.hit_key == hit_key)).all()
    left = ZERO
    for kind, amount in rows:
        if kind == "reserve":
            left += Decimal(amount)
        elif kind in ("charge", "release"):
            left -= Decimal(amount)
    if left <= 0:
        return ZERO
    booked = _book(session, LedgerRow(campaign=campaign, ref=f"release:{hit_key}:rest", kind="release", amount=fmt(left),
                                      hit_key=hit_key, note="closing the HIT"))
    return left if booked else ZERO


def reserve_bonus(session: Session, campaign: str, budget: Decimal, ref: str, amount: Decimal, assignment_id: str) -> Decimal:
    total = amount + bonus_fee(amount)
    if session.exec(select(LedgerRow.id).where(LedgerRow.campaign == campaign, LedgerRow.ref == f"bonus_reserve:{ref}")).first():
        return total
    t = totals(session, campaign, budget)
    if t.spent + t.reserved + total > budget:
        raise BudgetExceeded(f"a ${fmt(amount)} bonus needs ${fmt(total)} with fees; only ${fmt(t.remaining)} left")
    _book(session, LedgerRow(campaign=campaign, ref=f"bonus_reserve:{ref}", kind="bonus_reserve", amount=fmt(total), assignment_id=assignment_id))
    return total


def charge_bonus(session: Session, campaign: str, ref: str, amount: Decimal, assignment_id: str) -> bool:
    return _book(session, LedgerRow(campaign=campaign, ref=f"bonus_charge:{ref}", kind="bonus_charge",
                                    amount=fmt(amount + bonus_fee(amount)), fee=fmt(bonus_fee(amount)), assignment_id=assignment_id))


def spent_count(session: Session, campaign: str) -> int:
    return int(session.exec(select(func.count()).select_from(LedgerRow).where(LedgerRow.campaign == campaign, LedgerRow.kind == "charge")).one())


def release_bonus(session: Session, campaign: str, ref: str, amount: Decimal, assignment_id: str) -> bool:
    """A bonus that the marketplace refused will not be paid: free its reservation."""
    return _book(session, LedgerRow(campaign=campaign, ref=f"bonus_release:{ref}", kind="bonus_release",
                                    amount=fmt(amount + bonus_fee(amount)), assignment_id=assignment_id))
