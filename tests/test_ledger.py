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


def test_reserve_hits_reads_totals_once_and_stops_at_the_budget(store):
    budget = Decimal("1.00")  # room for two HITs of 0.35
    with store.session() as s:
        ledger.reserve_hit(s, "c", budget, "h1", Decimal("0.06"), 5)
        got, err = ledger.reserve_hits(s, "c", budget, [("h1", Decimal("0.06"), 5), ("h2", Decimal("0.06"), 5),
                                                        ("h3", Decimal("0.06"), 5), ("h4", Decimal("0.06"), 5)])
    assert got == {"h1": Decimal("0.35"), "h2": Decimal("0.35")}  # h1 was reserved already: not again
    assert isinstance(err, ledger.BudgetExceeded) and "posting h3 needs $0.35 but only $0.30" in str(err)
    with store.session() as s:
        assert ledger.totals(s, "c", budget).reserved == Decimal("0.70")
        assert ledger.reserve_hits(s, "c", budget, [("h2", Decimal("0.06"), 5)]) == ({"h2": Decimal("0.35")}, None)
        assert ledger.totals(s, "c", budget).reserved == Decimal("0.70")


def test_book_many_books_each_ref_once(store):
    with store.session() as s:
        ledger.reserve_hit(s, "c", Decimal("5.00"), "h1", Decimal("0.06"), 5)
        assert ledger.charge_assignment(s, "c", "h1", "A1", Decimal("0.06"), 5)
    with store.session() as s:
        rows = [ledger.charge_row("c", "h1", a, Decimal("0.06"), 5) for a in ("A1", "A2", "A2")]
        rows.append(ledger.release_row("c", "h1", "A3", Decimal("0.06"), 5))
        assert ledger.book_many(s, rows) == 2  # A1 was booked before, A2 is listed twice
    with store.session() as s:
        t = ledger.totals(s, "c", Decimal("5.00"))
        assert (t.spent, t.reserved) == (Decimal("0.14"), Decimal("0.14"))
        # the same entries as charge_assignment / release_assignment book one by one
        assert not ledger.charge_assignment(s, "c", "h1", "A2", Decimal("0.06"), 5)
        assert not ledger.release_assignment(s, "c", "h1", "A3", Decimal("0.06"), 5)
