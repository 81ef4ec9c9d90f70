from decimal import Decimal

import pytest

from campaign import ledger
from campaign.store import Store


@pytest.fixture()
def store(tmp_path):
    s = Store.open(tmp_path)
    yield s
    s.close()


def test_reserve_charge_release_balance_out(store):
    budget = Decimal("1.00")
    with store.session() as s:
        assert ledger.reserve_hit(s, "c", budget, "h1", Decimal("0.06"), 5) == Decimal("0.35")
        assert ledger.reserve_hit(s, "c", budget, "h1", Decimal("0.06"), 5) == Decimal("0.35")  # idempotent
    with store.session() as s:
        t = ledger.totals(s, "c", budget)
        assert (t.reserved, t.spent, t.remaining) == (Decimal("0.35"), Decimal("0"), Decimal("0.65"))
        assert ledger.charge_assignment(s, "c", "h1", "A1", Decimal("0.06"), 5)
        assert not ledger.charge_assignment(s, "c", "h1", "A1", Decimal("0.06"), 5)  # never twice
        assert ledger.release_assignment(s, "c", "h1", "A2", Decimal("0.06"), 5)
    with store.session() as s:
        t = ledger.totals(s, "c", budget)
        assert (t.spent, t.fees, t.reserved) == (Decimal("0.07"), Decimal("0.01"), Decimal("0.21"))
        assert ledger.release_hit_rest(s, "c", "h1") == Decimal("0.21")
        assert ledger.release_hit_rest(s, "c", "h1") == Decimal("0")
    with store.session() as s:
        t = ledger.totals(s, "c", budget)
        assert t.reserved == Decimal("0") and t.spent == Decimal("0.07")


def test_budget_cap_counts_reservations(store):
    budget = Decimal("0.70")
    with store.session() as s:
        ledger.reserve_hit(s, "c", budget, "h1", Decimal("0.06"), 5)
        ledger.reserve_hit(s, "c", budget, "h2", Decimal("0.06"), 5)
        with pytest.raises(ledger.BudgetExceeded, match=r"needs \$0.35 but only \$0.00"):
            ledger.reserve_hit(s, "c", budget, "h3", Decimal("0.06"), 5)


def test_bonus_is_reserved_and_charged_with_its_fee(store):
    budget = Decimal("5.00")
    with store.session() as s:
        assert ledger.reserve_bonus(s, "c", budget, "b1", Decimal("1.00"), "A1") == Decimal("1.20")
        assert ledger.charge_bonus(s, "c", "b1", Decimal("1.00"), "A1")
        assert not ledger.charge_bonus(s, "c", "b1", Decimal("1.00"), "A1")
        t = ledger.totals(s, "c", budget)
        assert t.spent == Decimal("1.20") and t.reserved == Decimal("0.00") and t.fees == Decimal("0.20")
