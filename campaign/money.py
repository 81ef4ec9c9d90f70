"""Money arithmetic: Decimal only, MTurk's fee schedule, and the wire format of `CurrencyAmount`.

One module, so the marketplace server and the campaign's ledger compute fees by the same rule and can
be compared to the cent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

CENT = Decimal("0.01")
MIN_FEE = Decimal("0.01")
BASE_FEE_RATE = Decimal("0.20")
LARGE_HIT_EXTRA_RATE = Decimal("0.20")  # MaxAssignments >= 10, on the reward only
MASTERS_EXTRA_RATE = Decimal("0.05")
LARGE_HIT_THRESHOLD = 10

CURRENCY_PATTERN = re.compile(r"^[0-9]+(\.)?[0-9]{0,2}$")


class MoneyError(ValueError):
    """A string is not a valid amount of money."""


MAX_DIGITS = 15  # digits before the point: far beyond any budget, well inside Decimal's 28-digit precision


def parse_amount(text: str | int | Decimal) -> Decimal:
    """Parse a `CurrencyAmount` ("0.06", "5") strictly: at most two decimals, never negative."""
    if isinstance(text, Decimal):
        value = text
    else:
        s = str(text).strip()
        if not CURRENCY_PATTERN.match(s):
            raise MoneyError(f"{_quoted(text)} {_why_not_money(s)}")
        try:
            value = Decimal(s)
        except InvalidOperation as exc:  # pragma: no cover - the pattern already excludes this
            raise MoneyError(f"{_quoted(text)} is not a number") from exc
    if not value.is_finite():
        raise MoneyError(f"{_quoted(text)} is not an amount of money")
    if value < 0:
        raise MoneyError(f"{_quoted(text)} is negative")
    if value.adjusted() >= MAX_DIGITS:  # quantize would raise InvalidOperation past the context's precision
        raise MoneyError(f"{_quoted(text)} is too large for an amount of money")
    if value != value.quantize(CENT):
        raise MoneyError(f"{_quoted(text)} has more than two decimals")
    return value.quantize(CENT)


def _why_not_money(s: str) -> str:
    """Why `s`, which is not digits with at most two decimals, is refused: said as precisely as it can be,
    since a person typed it (`campaign budget --set -5` was told it had too many decimals)."""
    try:
        value = Decimal(s)
    except InvalidOperation:
        value = None
    if value is None or not value.is_finite():
        return "is not an amount of money (digits with at most two decimals, e.g. 12.50)"
    if value < 0 or s.startswith("-"):
        return "is negative"
    if not re.fullmatch(r"[0-9]+\.?[0-9]*", s):  # 1e3, +5, .5, 1_000: numbers, not written as plain digits
        return "is not written as plain digits (e.g. 12.50)"
    return "has more than two decimals"


def _quoted(text: object) -> str:
    """`text` as an error message quotes it, cut short: the amount may be anyone's input, of any length."""
    r = repr(text if isinstance(text, Decimal) else str(text))
    return r if len(r) <= 40 else r[:37] + "..."


def fmt(amount: Decimal) -> str:
    """The wire and export form of an amount: always two decimals."""
    return str(Decimal(amount).quantize(CENT, rounding=ROUND_HALF_UP))


CURRENCY_SIGNS = {"USD": "$", "GBP": "\u00a3"}  # the currencies a campaign can pay in (MTurk: USD; Prolific: GBP, USD)


def shown(amount: Decimal | str, currency: str = "USD") -> str:
    """An amount as a person reads it, in the campaign's currency: "$1.20", "\u00a31.20" (a currency
    without a sign here: "1.20 EUR"). A Prolific campaign paying in pounds must not show dollars."""
    sign = CURRENCY_SIGNS.get(currency)
    return f"{sign}{fmt(Decimal(amount))}" if sign else f"{fmt(Decimal(amount))} {currency}"


def round_cents(amount: Decimal) -> Decimal:
    return Decimal(amount).quantize(CENT, rounding=ROUND_HALF_UP)


def fee_rate(max_assignments: int, masters: bool = False) -> Decimal:
    rate = BASE_FEE_RATE
    if max_assignments >= LARGE_HIT_THRESHOLD:
        rate += LARGE_HIT_EXTRA_RATE
    if masters:
        rate += MASTERS_EXTRA_RATE
    return rate


def assignment_fee(reward: Decimal, max_assignments: int, masters: bool = False) -> Decimal:
    """MTurk's commission on one approved assignment: 20% (+20% at >=10 assignments, +5% Masters), min $0.01."""
    return max(MIN_FEE, round_cents(Decimal(reward) * fee_rate(max_assignments, masters)))


def bonus_fee(amount: Decimal) -> Decimal:
    """Bonuses pay 20%, minimum $0.01, whatever the HIT's size."""
    return max(MIN_FEE, round_cents(Decimal(amount) * BASE_FEE_RATE))


def assignment_cost(reward: Decimal, max_assignments: int, masters: bool = False) -> Decimal:
    """What one approved assignment draws from the account: reward plus fee."""
    return Decimal(reward) + assignment_fee(reward, max_assignments, masters)


def hit_cost(reward: Decimal, max_assignments: int, masters: bool = False) -> Decimal:
    """What a whole HIT can cost if every assignment is approved; the amount reserved at posting."""
    return assignment_cost(reward, max_assignments, masters) * max_assignments


@dataclass(frozen=True)
class Cost:
    """One payment as the ledger books it: `total` drawn from the account, `fee` (fees and tax) inside it."""

    total: Decimal
    fee: Decimal


class MTurkFees:
    """MTurk's fee schedule, the default every marketplace without its own uses (`campaign.marketplaces.base.fees_of`).

    The steps and the ledger ask a schedule rather than calling the functions above, so a marketplace
    that pays differently (Prolific: per place, with its own fee and VAT) brings its own rules."""

    currency = "USD"

    def hit_reserve(self, reward: Decimal, assignments: int) -> Decimal:
        """What posting one HIT reserves: its worst case."""
        return hit_cost(reward, assignments)

    def assignment(self, reward: Decimal, assignments: int) -> Cost:
        """What one approved assignment costs."""
        return Cost(assignment_cost(reward, assignments), assignment_fee(reward, assignments))

    def bonus(self, amount: Decimal) -> Cost:
        fee = bonus_fee(amount)
        return Cost(Decimal(amount) + fee, fee)


MTURK_FEES = MTurkFees()
