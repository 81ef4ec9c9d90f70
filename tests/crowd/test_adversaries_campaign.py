"""Whole campaigns against a hostile crowd (slow): the demo's Likert campaign on the built-in marketplace
and the Prolific one, a quarter of each crowd adversarial. Each must finish, keep its quality, and pay
nobody for work without a valid answer (the check `campaign bench hostile` runs on every run)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from campaign.bench.hostile import adversary_outcomes, books_check, quality, unpaid_check
from campaign.daemon import RunOptions, run
from campaign.spec import ADVERSARIES_ENV, Spec, load_spec
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow


def _hostile(names: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> Spec:
    """examples/hostile.yaml's campaigns named, with every behaviour its crowds have (a Prolific place
    completed at once without work included: the campaign rejects it, NO_CODE, instead of waiting for
    Prolific to approve it by itself after 21 simulated days, as it did when this test first left it out)."""
    monkeypatch.delenv(ADVERSARIES_ENV, raising=False)
    spec = load_spec(ROOT / "examples" / "hostile.yaml")
    assert all(c.crowd.adversaries.share == 0.25 for c in spec.campaigns)
    return Spec(path=spec.path, campaigns=tuple(c for c in spec.campaigns if c.name in names))


@pytest.mark.parametrize(("name", "floor"), [("water-bottles", {"water-bottles/likert": 0.85}),
                                             ("water-prolific", {"water-prolific/likert": 0.85, "water-prolific/ranking": 0.4})])
def test_a_hostile_crowd_neither_stops_the_campaign_nor_gets_paid_for_nothing(
        name: str, floor: dict[str, float], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logging.getLogger("apscheduler").setLevel(logging.ERROR)
    spec = _hostile((name,), monkeypatch)
    code = run(spec, RunOptions(state_dir=tmp_path / "state", seed=1, max_seconds=420))
    assert code == 0, "the campaign did not finish"
    money = unpaid_check(tmp_path / "state")
    assert money["violations"] == [] and sum(money["checked"].values()) > 0
    assert books_check(tmp_path / "state") == []  # nothing charged twice or left reserved; ledger = marketplace = Prolific
    outcomes = adversary_outcomes(spec, 1, tmp_path / "state")
    c = spec.campaigns[0]
    assert sum(o["workers"] for o in outcomes.values()) == round(c.crowd.adversaries.share * c.crowd.workers)
    for b in ("empty", "no_work"):  # nothing answered: nothing approved, nothing paid (return_midway answers part of a Prolific bundle)
        assert outcomes.get(b, {}).get("approved", 0) == 0 and outcomes.get(b, {}).get("charged", "0.00") == "0.00", outcomes
    got = quality(spec, tmp_path / "state")
    for stage, lowest in floor.items():
        assert got[stage]["value"] >= lowest, got  # the clean crowd's: likert 0.93-0.94, ranking 0.63
