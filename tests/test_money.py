from decimal import Decimal

import pytest

from campaign.money import MoneyError, assignment_fee, bonus_fee, hit_cost, parse_amount


def test_fee_is_twenty_percent_with_a_one_cent_minimum():
    assert assignment_fee(Decimal("0.06"), 5) == Decimal("0.01")  # 0.012 rounds to 0.01
    assert assignment_fee(Decimal("0.50"), 5) == Decimal("0.10")
    assert assignment_fee(Decimal("0.01"), 1) == Decimal("0.01")


def test_ten_or_more_assignments_pay_forty_percent_on_the_reward():
    assert assignment_fee(Decimal("0.50"), 9) == Decimal("0.10")
    assert assignment_fee(Decimal("0.50"), 10) == Decimal("0.20")
    assert bonus_fee(Decimal("1.00")) == Decimal("0.20")


def test_rounding_is_half_up_to_the_cent():
    assert assignment_fee(Decimal("0.52"), 1) == Decimal("0.10")  # 0.104
    assert assignment_fee(Decimal("0.53"), 1) == Decimal("0.11")  # 0.106
    assert assignment_fee(Decimal("0.525"), 1) == Decimal("0.11")  # 0.105 -> half up


def test_hit_cost_reserves_every_assignment():
    assert hit_cost(Decimal("0.06"), 5) == Decimal("0.35")
    assert hit_cost(Decimal("0.07"), 7) == Decimal("0.56")


@pytest.mark.parametrize("bad", ["0.065", "-1", "abc", "1.", "", "1e3"])
def test_parse_amount_refuses_bad_money(bad):
    if bad == "1.":
        assert parse_amount(bad) == Decimal("1.00")  # MTurk's own pattern accepts a trailing dot
        return
    with pytest.raises(MoneyError):
        parse_amount(bad)


def test_amounts_are_shown_in_their_currency():
    from campaign.money import shown

    assert shown(Decimal("1.2")) == "$1.20"
    assert shown("0.905", "GBP") == "\u00a30.91"  # half up, to the cent
    assert shown(Decimal("3"), "EUR") == "3.00 EUR"  # no sign known: the code, never a wrong sign


@pytest.mark.parametrize("bad", ["9" * 5000, "1000000000000000", Decimal("NaN"), Decimal("Infinity"), Decimal("1e400")])
def test_parse_amount_refuses_what_cannot_be_money_with_a_short_message(bad):
    """5,000 nines raised decimal.InvalidOperation (quantize past the context's precision) out of
    `campaign budget --set` and the spec's amounts, a traceback instead of an error."""
    with pytest.raises(MoneyError) as caught:
        parse_amount(bad)
    assert len(str(caught.value)) < 100
    assert parse_amount("999999999999999") == Decimal("999999999999999.00")


@pytest.mark.parametrize(("bad", "why"), [
    ("-5", "is negative"), ("-0.50", "is negative"), ("0.001", "has more than two decimals"),
    ("12.345", "has more than two decimals"), ("1e3", "is not written as plain digits"), ("+5", "is not written as plain digits"),
    ("1,50", "is not an amount of money (digits with at most two decimals"), ("", "is not an amount of money"),
    ("twelve", "is not an amount of money")])
def test_a_refused_amount_says_what_is_wrong_with_it(bad, why):
    """Before: `campaign budget --set -5` was told '-5' is not an amount 'with at most two decimals'."""
    with pytest.raises(MoneyError) as caught:
        parse_amount(bad)
    assert str(caught.value) == f"{bad!r} {why}" or str(caught.value).startswith(f"{bad!r} {why}")
