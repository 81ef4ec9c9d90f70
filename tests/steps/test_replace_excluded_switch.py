"""`quality.replace_excluded`: every stage asks again for answers that were rejected or left out by quality
control, whatever its kind; without it a Likert stage does with fewer answers, and a study's places
(Prolific) are never topped up for a kind that asks on its own."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from sqlmodel import select

from campaign.marketplaces.base import Studies
from campaign.steps.replace import replace_refused, replaces
from campaign.store import HitRow, LedgerRow


def _switched(ctx, on: bool):
    q = dataclasses.replace(ctx.campaign.quality, replace_excluded=on)
    ctx.campaign = dataclasses.replace(ctx.campaign, quality=q)


def _answered_with_one_left_out(harness):
    h = harness()
    hits = h.answer_all_reviewed()
    h.leave_out_first_answer(hits[0].hit_key)  # quality control left one answer's labels out (approved and paid)
    return h, hits[0]


def test_a_likert_answer_left_out_is_asked_for_again_only_with_the_switch(harness):
    h, hit = _answered_with_one_left_out(harness)
    _switched(h.ctx, False)
    assert replace_refused(h.ctx) == 0  # a Likert mean does with fewer answers
    _switched(h.ctx, True)
    assert replace_refused(h.ctx) == 1
    assert replace_refused(h.ctx) == 0  # once
    with h.ctx.store.session() as s:
        row = s.exec(select(HitRow).where(HitRow.hit_key == hit.hit_key)).one()
        assert row.assignments == 4
        refs = [r.ref for r in s.exec(select(LedgerRow).where(LedgerRow.hit_key == hit.hit_key)).all()]
    assert f"reserve:{hit.hit_key}:extra-1" in refs  # booked before the call


def _study_market() -> Studies:
    """Just enough of a marketplace with studies for `isinstance(..., Studies)`."""
    names = [n for n in dir(Studies) if not n.startswith("_")]
    return type("StudyMarket", (), {n: (lambda self, *a, **k: None) for n in names})()


def test_which_stages_ask():
    study = _study_market()
    assert isinstance(study, Studies)
    off = SimpleNamespace(campaign=SimpleNamespace(quality=SimpleNamespace(replace_excluded=False)))
    on = SimpleNamespace(campaign=SimpleNamespace(quality=SimpleNamespace(replace_excluded=True)))
    assert replaces(off, object(), "nuggets")  # needs every answer
    assert not replaces(off, object(), "likert")
    assert not replaces(off, study, "nuggets")  # places are priced without replacements unless the spec asks
    assert replaces(on, study, "likert") and replaces(on, object(), "ranking") and replaces(on, study, "nuggets")


def test_on_a_study_slots_the_budget_cannot_place_are_not_asked_for(harness):
    """A replacement on Prolific needs places, which `open_places` never opens beyond the budget; slots
    asked for without them would keep their HIT open for nothing, so they are not asked for."""
    from decimal import Decimal

    from campaign.money import Cost
    from campaign.steps.replace import _places_short

    h = harness()  # budget $10.00, nothing booked yet
    study = _study_market()
    type(study).place_cost = lambda self: Cost(total=Decimal("4.00"), fee=Decimal("1.00"))  # type: ignore[method-assign]
    assert _places_short(h.ctx, study, 2) == ""
    assert "3 more place(s) would need 12.00 but only 10.00" in _places_short(h.ctx, study, 3)
    assert _places_short(h.ctx, object(), 3) == ""  # elsewhere a slot is booked by `reserve_extra` itself
