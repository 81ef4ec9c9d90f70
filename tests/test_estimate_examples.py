"""Every shipped example's cost estimate against what its run actually spends (the ledger's spent total):
within 5%. With a simulated crowd the figure compared is the estimate's expected spend (`expected`, the
spammers' rejected work unpaid) where it has one, else its total; bonuses are not in either (they depend
on who turns out careful) and are checked against the estimate's "at most" instead."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from sqlmodel import select

from campaign.estimate import estimate_spec
from campaign.ledger import totals
from campaign.spec import load_spec
from campaign.store import LedgerRow, Store
from tests.support.cli import run_args, run_campaign
from tests.support.paths import ROOT

# examples/hostile.yaml is the demo's campaigns with a quarter of each crowd adversarial: which adversaries'
# work gets paid is what `campaign bench hostile` measures, and the estimate does not model it (one run:
# water-bottles expected $3.78, total $4.20, spent $3.99), so it is left out here.
SPECS = [ROOT / "campaigns.yaml", *sorted(p for p in (ROOT / "examples").glob("*.yaml") if p.name != "hostile.yaml")]
# The Prolific example's work is paid per HIT used (a shorter bundle its share of a place), and the
# estimate prices it so, and the ranking stage's ties at its shortlist's cut as the run plans them (9-13
# HITs, about 10 to expect). Its run on the test's seed is within 5% and must stay so. Other seeds are
# not all: which participants take the places first decides how much of the reviewed work spammers do,
# and so what is rejected and unpaid, which one figure cannot follow. Since a Prolific submission is
# rejected only for failed attention checks (spam otherwise paid, issue 27), the expected spend counts
# the spammers' whole bundles that fail two checks; a ranking stage's bundles rarely fill (its HITs
# share shortlisted items, and nobody gets two HITs sharing one), so they end short and are paid per
# task, never rejected (`full_bundle_chance`): expected £22.04. 2026-11-26, seeds 0-3: £21.00, £21.00,
# £22.05, £22.05 (all within 5%; against £20.78 when ranking bundles were priced as if whole, 2 of 4);
# before, with all spam unpaid, seeds 0-5 were £19.74, £19.53, £21.00, £18.90, £19.95, £23.10 against
# £20.15 (4 of 6).


@pytest.mark.slow
@pytest.mark.parametrize("spec_path", SPECS, ids=lambda p: Path(p).name)
def test_estimate_is_within_five_percent_of_the_runs_spend(spec_path, tmp_path):
    state = tmp_path / "state"
    run = run_campaign(*run_args(spec_path, state), cwd=tmp_path, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    spec = load_spec(spec_path)
    store = Store.open(state, None)
    try:
        for est in estimate_spec(spec):
            with store.session() as s:
                money = totals(s, est.name, est.budget)
                bonuses = sum((Decimal(r.amount) for r in s.exec(select(LedgerRow).where(
                    LedgerRow.campaign == est.name, LedgerRow.kind == "bonus_charge")).all()), Decimal("0"))
            assert money.reserved == 0
            work = money.spent - bonuses
            figure = est.expected if est.expected is not None else est.total
            print(f"{spec_path.name} {est.name}: estimate {est.total} (expected {est.expected}), spent on HITs {work}, "
                  f"bonuses {bonuses} of at most {est.bonuses_at_most}")
            assert abs(work - figure) <= Decimal("0.05") * work, (est.name, figure, work)
            if est.hourly is None:  # per-HIT pay: the everyone-paid figure is never beaten (on Prolific a
                assert work <= est.total  # rejected submission's place reopens and is paid to someone else)
            assert bonuses <= est.bonuses_at_most
    finally:
        store.close()
