"""Fees, balances, bonuses and InsufficientFunds in the two account modes."""

from __future__ import annotations

from decimal import Decimal

import pytest
from botocore.exceptions import ClientError

from campaign.money import assignment_fee


def _balance(m) -> Decimal:
    return Decimal(m.client.call("get_account_balance")["AvailableBalance"])


def test_sandbox_balance_never_moves(market):
    h = market.hit(reward="1.00", max_assignments=1)
    aid = market.work(h["HITId"], "AWORKERONE")
    market.client.call("approve_assignment", AssignmentId=aid)
    assert market.client.call("get_account_balance")["AvailableBalance"] == "10000.00"


@pytest.mark.parametrize("reward,n,fee", [("0.06", 5, "0.01"), ("0.50", 10, "0.20"), ("0.50", 9, "0.10"),
                                          ("0.01", 1, "0.01"), ("0.53", 1, "0.11"), ("0.52", 1, "0.10")])
def test_fee_schedule_matches_money_module(reward, n, fee):
    assert assignment_fee(Decimal(reward), n) == Decimal(fee)


def test_prod_charges_reward_plus_fee_at_approval(prod_market):
    m = prod_market
    h = m.hit(reward="0.06", max_assignments=5)
    assert _balance(m) == Decimal("10.00")
    aids = [m.work(h["HITId"], f"AWORKER{i}") for i in range(3)]
    m.client.call("approve_assignment", AssignmentId=aids[0])
    assert _balance(m) == Decimal("9.93")  # 0.06 + min fee 0.01
    m.client.call("reject_assignment", AssignmentId=aids[1], RequesterFeedback="no")
    assert _balance(m) == Decimal("9.93")  # rejected work costs nothing
    m.clock.advance(3601)  # auto-approval is charged too
    assert _balance(m) == Decimal("9.86")
    m.client.call("send_bonus", WorkerId="AWORKER0", AssignmentId=aids[0], BonusAmount="0.50", Reason="good",
                  UniqueRequestToken="bonus-1")
    assert _balance(m) == Decimal("9.26")  # 0.50 + 20%
    with pytest.raises(ClientError) as ei:
        m.client.call("send_bonus", WorkerId="AWORKER0", AssignmentId=aids[0], BonusAmount="0.50", Reason="good",
                      UniqueRequestToken="bonus-1")
    assert "already been processed" in ei.value.response["Error"]["Message"]
    assert _balance(m) == Decimal("9.26")
    pays = m.client.call("list_bonus_payments", AssignmentId=aids[0])["BonusPayments"]
    assert [(p["WorkerId"], p["BonusAmount"], p["Reason"]) for p in pays] == [("AWORKER0", "0.50", "good")]
    assert m.client.call("list_bonus_payments", HITId=h["HITId"])["NumResults"] == 1
    with pytest.raises(ClientError):
        m.client.call("send_bonus", WorkerId="AOTHER", AssignmentId=aids[0], BonusAmount="0.10", Reason="x")


def test_forty_percent_fee_at_ten_assignments(prod_market):
    m = prod_market
    h = m.hit(reward="0.50", max_assignments=10)
    aid = m.work(h["HITId"], "AWORKERONE")
    m.client.call("approve_assignment", AssignmentId=aid)
    assert _balance(m) == Decimal("9.30")


def test_insufficient_funds_on_create_counts_outstanding_liability(prod_market):
    m = prod_market  # 10.00 available
    m.hit(reward="1.00", max_assignments=6)  # 6 x 1.20 = 7.20 committed
    with pytest.raises(ClientError) as ei:
        m.hit(reward="1.00", max_assignments=3)  # 3.60 > 2.80 left
    assert ei.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.InsufficientFunds"
    assert m.client.call("list_hits")["NumResults"] == 1
    m.hit(reward="1.00", max_assignments=2)  # 2.40 fits


def test_insufficient_funds_on_bonus_and_approve(prod_market):
    m = prod_market
    h = m.hit(reward="1.00", max_assignments=1)
    aid = m.work(h["HITId"], "AWORKERONE")
    with pytest.raises(ClientError) as ei:
        m.client.call("send_bonus", WorkerId="AWORKERONE", AssignmentId=aid, BonusAmount="9.00", Reason="too much")
    assert ei.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.InsufficientFunds"
    m.client.call("send_bonus", WorkerId="AWORKERONE", AssignmentId=aid, BonusAmount="7.50", Reason="ok")  # 9.00 total
    with pytest.raises(ClientError) as ei:
        m.client.call("approve_assignment", AssignmentId=aid)  # 1.20 > 1.00
    assert ei.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.InsufficientFunds"
    assert m.client.call("get_assignment", AssignmentId=aid)["Assignment"]["AssignmentStatus"] == "Submitted"
