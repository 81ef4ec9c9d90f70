"""The studies steps on their own, over a stand-in `Studies` marketplace: places reserved in the ledger
before they are opened (never past the budget), approved places charged once however often they are
reported, unused places released only when nothing more can be paid, and `finish` held until then."""

from __future__ import annotations

import threading
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

from sqlmodel import select

from campaign.clock import ManualClock
from campaign.daemon import ensure_campaign_row
from campaign.ledger import totals
from campaign.marketplaces.base import MarketError, PaymentUncertain, Studies, StudySubmission, TransientError
from campaign.money import Cost
from campaign.spec import load_spec
from campaign.state import Keys
from campaign.steps.context import Context
from campaign.steps.studies import open_places, settle_studies
from campaign.steps.study_state import studies_over
from campaign.store import EventRow, HitRow, Store
from tests.support.specs import NO_CROWD, campaign, first_propositions, write_spec

PROLIFIC = {"reward": "1.50", "bundle": 5, "estimated_minutes": 10, "fee_rate": "0.333", "vat_rate": "0.2"}
PLACE = Cost(Decimal("2.10"), Decimal("0.60"))


class FakeFees:
    """A bonus costs its amount plus 0.20 (the stand-in marketplace's pay_work charges the same)."""

    currency = "GBP"

    def hit_reserve(self, reward: Decimal, assignments: int) -> Decimal:
        return Decimal("0.00")

    def assignment(self, reward: Decimal, assignments: int) -> Cost:
        return Cost(Decimal("0.00"), Decimal("0.00"))

    def bonus(self, amount: Decimal) -> Cost:
        return Cost(amount + Decimal("0.20"), Decimal("0.20"))


class FakeStudies:
    """Records the calls the steps make; answers what the test sets."""

    fees = FakeFees()

    def __init__(self) -> None:
        self.wanted: dict[str, int] = {}
        self.places: dict[str, int] = {}
        self.subs: list[StudySubmission] = []
        self.pending = True
        self.stopped: list[str] = []
        self.fail_refill = 0
        self.paid: list[tuple[str, Decimal]] = []
        self.fail_pay = 0
        self.uncertain: set[str] = set()  # submissions whose work pay never shows (PaymentUncertain)
        self.resolved: list[tuple[str, bool]] = []

    def place_cost(self) -> Cost:
        return PLACE

    def places_wanted(self) -> dict[str, int]:
        return dict(self.wanted)

    def refill(self, key: str, places: int) -> int:
        if self.fail_refill:
            self.fail_refill -= 1
            raise TransientError("connection reset")
        self.places[key] = max(self.places.get(key, 0), places)
        return self.places[key]

    def settle(self) -> list[StudySubmission]:
        return list(self.subs)

    def stop(self, key: str) -> bool:
        self.stopped.append(key)
        return not self.pending

    def pay_work(self, key: str, submission_id: str, amount: Decimal) -> Cost:
        self.paid.append((submission_id, amount))
        if submission_id in self.uncertain:
            raise PaymentUncertain(f"the pay of {submission_id} may have gone through")
        if self.fail_pay:
            self.fail_pay -= 1
            raise TransientError("bonus not visible yet")
        return self.fees.bonus(amount)

    def resolve_uncertain(self, key: str, paid: bool) -> None:
        self.resolved.append((key, paid))
        self.uncertain.discard(key.removeprefix("work:"))


def _ctx(tmp_path: Path, market: FakeStudies) -> Context:
    cfg = write_spec(tmp_path / "campaigns.yaml", campaign("steps", task={"kind": "likert"}, marketplace="prolific-local", prolific=PROLIFIC,
                                                           budget="10.00", propositions=first_propositions(tmp_path, 10), crowd=NO_CROWD,
                                                           poll_interval=None))
    loaded = load_spec(cfg).campaigns[0]
    store = Store.open(tmp_path / "state")
    instance = ensure_campaign_row(store, loaded, 0)
    return Context(store=store, market=market, campaign=loaded, seed=0, state_dir=tmp_path / "state",  # type: ignore[arg-type]
                   clock=ManualClock(), instance=instance, lock=threading.Lock())


def _totals(ctx: Context):
    with ctx.store.session() as s:
        return totals(s, ctx.name, ctx.campaign.budget)


def test_places_are_reserved_before_they_open_and_never_past_the_budget(tmp_path):
    market = FakeStudies()
    assert isinstance(market, Studies)
    ctx = _ctx(tmp_path, market)
    try:
        market.wanted = {"T1": 3}
        market.fail_refill = 1  # the call fails after the reservation: reserved, not open; the next pass opens them
        assert open_places(ctx) == 0 and market.places == {}
        assert _totals(ctx).reserved == Decimal("6.30")
        assert open_places(ctx) == 3 and market.places == {"T1": 3}
        assert _totals(ctx).reserved == Decimal("6.30")  # not reserved twice
        market.wanted = {"T1": 6}  # 6 x 2.10 = 12.60 > 10.00: only one more place fits
        assert open_places(ctx) == 1 and market.places == {"T1": 4}
        t = _totals(ctx)
        assert t.reserved == Decimal("8.40") and t.spent + t.reserved <= t.budget
        assert "place 5 of study T1" in (ctx.store.get_kv(ctx.name, Keys.BUDGET_BLOCKED, "") or "")
        assert open_places(ctx) == 0 and market.places == {"T1": 4}
        with ctx.store.session() as s:
            said = [e.message for e in s.exec(select(EventRow).where(EventRow.campaign == ctx.name, EventRow.kind == "places")
                                               .order_by(EventRow.id)).all()]
        # the study's places in all, and how many of them this pass opened (not "4 places open": 3 were taken)
        assert said == ["study T1: 3 more place(s) opened, 3 in all (2.10 reserved each)",
                        "study T1: 1 more place(s) opened, 4 in all (2.10 reserved each)"], said
    finally:
        ctx.store.close()


def test_approved_places_are_charged_once_and_the_rest_released_when_nothing_can_be_paid(tmp_path):
    market = FakeStudies()
    ctx = _ctx(tmp_path, market)
    try:
        market.wanted = {"T1": 3}
        open_places(ctx)
        with ctx.store.session() as s:  # the stage's one HIT, closed: the stage is complete
            s.add(HitRow(campaign=ctx.name, stage="likert", hit_key="likert-0001", item_keys="[]", annotation="a", token="t",
                         status="closed", reward="0.06", assignments=5, hit_id="H1", hit_type_id="T1"))
        market.subs = [StudySubmission("T1", "S1", "APX", "approved"), StudySubmission("T1", "S2", "APY", "rejected"),
                       StudySubmission("T1", "S3", "APZ", "pending")]
        assert settle_studies(ctx) == 1
        assert settle_studies(ctx) == 0  # reported again: not charged again
        t = _totals(ctx)
        assert (t.spent, t.reserved) == (Decimal("2.10"), Decimal("4.20"))
        assert market.stopped == ["T1", "T1"] and not studies_over(ctx)  # S3 may still be paid: nothing released
        market.subs[2] = replace(market.subs[2], status="approved")
        market.pending = False
        assert settle_studies(ctx) == 1
        t = _totals(ctx)
        assert (t.spent, t.reserved) == (Decimal("4.20"), Decimal("0.00"))  # the third place, never paid, released
        assert studies_over(ctx)
        stops = len(market.stopped)
        settle_studies(ctx)
        assert len(market.stopped) == stops  # an ended study is left alone
    finally:
        ctx.store.close()


class RefusingStudies(FakeStudies):
    """The service answers every attempt to open places with a final refusal (Prolific's 400 on a study)."""

    def __init__(self) -> None:
        super().__init__()
        self.refills = 0
        self.refuse = True

    def refill(self, key: str, places: int) -> int:
        self.refills += 1
        if self.refuse:
            raise MarketError("Prolific API 400 Bad request: {'maximum_allowed_time': ['must be at least 31 minutes']}",
                              "Prolific400")
        return super().refill(key, places)


def test_a_final_refusal_blocks_the_campaign_until_resume_instead_of_retrying_every_pass(tmp_path):
    """A 400 on study creation was retried every pass (66 `POST /studies/` in 49 s) with the campaign
    still "running": now the campaign is `blocked` with the service's message, no step runs, and
    `campaign resume` (after the researcher fixed the cause) tries again."""
    import argparse

    from campaign import ops
    from campaign.steps.pipeline import PIPELINE, run_pass
    from campaign.store import CampaignRow

    market = RefusingStudies()
    market.wanted = {"s1": 2}
    ctx = _ctx(tmp_path, market)
    places = tuple(s for s in PIPELINE if s.name == "places")

    def status() -> str:
        with ctx.store.session() as s:
            row = s.get(CampaignRow, ctx.name)
            assert row is not None
            return row.status

    for _ in range(6):
        run_pass(ctx, status(), pipeline=places)
    assert market.refills == 1 and status() == "blocked"
    with ctx.store.session() as s:
        events = [e for e in s.exec(select(EventRow).where(EventRow.campaign == ctx.name, EventRow.kind == "blocked")).all()]
    assert len(events) == 1 and "maximum_allowed_time" in events[0].message and "campaign resume" in events[0].message
    market.refuse = False  # the researcher fixed the spec
    args = argparse.Namespace(state=tmp_path / "state", db=None, name=ctx.name, cmd="resume")
    assert ops.resume(args) == 0 and status() == "running"
    run_pass(ctx, status(), pipeline=places)
    assert market.refills == 2 and market.places == {"s1": 2}


def test_throttling_is_retried_not_blocked(tmp_path):
    market = FakeStudies()
    market.wanted, market.fail_refill = {"s1": 2}, 1
    ctx = _ctx(tmp_path, market)
    open_places(ctx)
    with ctx.store.session() as s:
        from campaign.store import CampaignRow
        row = s.get(CampaignRow, ctx.name)
        assert row is not None and row.status == "running"
    open_places(ctx)
    assert market.places == {"s1": 2}


def test_a_returned_submissions_work_is_reserved_then_paid_and_charged_once(tmp_path):
    """A returned place's used work is owed: reserved in the ledger before it is paid (its place reopened
    for someone else, so the place's reservation stays), paid through the marketplace, charged once."""
    market = FakeStudies()
    ctx = _ctx(tmp_path, market)
    try:
        market.wanted = {"T1": 1}
        open_places(ctx)
        market.subs = [StudySubmission("T1", "S1", "APX", "returned", Decimal("0.60"))]
        market.fail_pay = 1  # paid, not visible yet: reserved, not charged; asked again next pass
        assert settle_studies(ctx) == 0
        t = _totals(ctx)
        assert (t.spent, t.reserved) == (Decimal("0.00"), Decimal("2.90"))  # the place and the work
        assert settle_studies(ctx) == 1 and settle_studies(ctx) == 0
        t = _totals(ctx)
        assert (t.spent, t.reserved) == (Decimal("0.80"), Decimal("2.10"))  # charged once, the place still reserved
        assert market.paid == [("S1", Decimal("0.60"))] * 3  # the marketplace pays once per submission however often asked
    finally:
        ctx.store.close()


def test_an_uncertain_work_pay_is_held_never_paid_again_and_booked_on_the_researchers_word(tmp_path):
    """A work pay whose payment may have gone through unrecorded: held (one row, one event), not asked
    for again while held; the researcher's `paid` books it without paying, once."""
    from campaign.state import Decision, HeldKind, HeldStatus
    from campaign.steps.settle import settle_decisions
    from campaign.store import EventRow, HeldRow

    market = FakeStudies()
    ctx = _ctx(tmp_path, market)
    try:
        market.wanted = {"T1": 1}
        open_places(ctx)
        market.subs = [StudySubmission("T1", "S1", "APX", "returned", Decimal("0.60"))]
        market.uncertain = {"S1"}
        assert settle_studies(ctx) == 0 and settle_studies(ctx) == 0
        assert market.paid == [("S1", Decimal("0.60"))]  # asked once; held since
        with ctx.store.session() as s:
            held = s.exec(select(HeldRow).where(HeldRow.row_kind == HeldKind.WORK)).one()
            assert held.row_key == "work:S1" and held.status == HeldStatus.HELD
            assert len(s.exec(select(EventRow).where(EventRow.kind == "held")).all()) == 1
            held.decision = Decision.PAID
            s.add(held)
        assert settle_decisions(ctx) == 1 and settle_decisions(ctx) == 0
        assert market.resolved == [("work:S1", True)] and market.paid == [("S1", Decimal("0.60"))]  # booked, not sent
        t = _totals(ctx)
        assert (t.spent, t.reserved) == (Decimal("0.80"), Decimal("2.10"))
    finally:
        ctx.store.close()


def test_work_the_budget_cannot_cover_is_not_paid(tmp_path):
    market = FakeStudies()
    ctx = _ctx(tmp_path, market)
    try:
        market.wanted = {"T1": 4}  # 4 x 2.10 = 8.40 of 10.00
        open_places(ctx)
        market.subs = [StudySubmission("T1", "S1", "APX", "returned", Decimal("1.50"))]  # 1.70 > 1.60 left
        assert settle_studies(ctx) == 0 and market.paid == []
        assert _totals(ctx).reserved == Decimal("8.40")
    finally:
        ctx.store.close()
