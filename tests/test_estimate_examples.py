"""Every shipped example's cost estimate against what its run actually spends (the ledger's spent total):
within 5% (the Prolific example: the mean of several seeds' runs, see `PROLIFIC_SEEDS`). With a simulated crowd the figure compared is the estimate's expected spend (`expected`, the
spammers' rejected work unpaid) where it has one, else its total; bonuses are not in either (they depend
on who turns out careful) and are checked against the estimate's "at most" instead."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path

import pytest
from sqlmodel import select

from campaign.estimate import CampaignEstimate, estimate_spec
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
# HITs, about 10 to expect). Which participants take the places first decides how much of the reviewed
# work spammers do, and so what is rejected and unpaid, which one figure cannot follow: one run's spend
# spreads about ±10% over seeds (2026-11-28, seeds 0-19: £19.95-£24.15, mean £22.26 against the expected
# £22.04; 5 of the 20 outside 5%), so one seed's run judged the estimate by luck, and any change that
# reordered who takes which place (new ids, another collect order) failed it about a quarter of the
# time. The test therefore judges the mean over `PROLIFIC_SEEDS` runs (their standard error about 2%
# of the figure) and checks each run's reservations, total and bonuses as for the other examples.
# Since a Prolific submission is rejected only for failed attention checks (spam otherwise paid, issue
# 27), the expected spend counts the spammers' whole bundles that fail two checks; a ranking stage's
# bundles rarely fill (its HITs share shortlisted items, and nobody gets two HITs sharing one), so they
# end short and are paid per task, never rejected (`full_bundle_chance`).
PROLIFIC_SEEDS = range(8)


def _spent(state: Path, estimates: Sequence[CampaignEstimate]) -> list[tuple[Decimal, Decimal]]:
    """Per estimated campaign: (spent on work, spent on bonuses) in the run's store, after checking that
    nothing stays reserved."""
    store = Store.open(state, None)
    out = []
    try:
        for est in estimates:
            with store.session() as s:
                money = totals(s, est.name, est.budget)
                bonuses = sum((Decimal(r.amount) for r in s.exec(select(LedgerRow).where(
                    LedgerRow.campaign == est.name, LedgerRow.kind == "bonus_charge")).all()), Decimal("0"))
            assert money.reserved == 0
            out.append((money.spent - bonuses, bonuses))
    finally:
        store.close()
    return out


@pytest.mark.slow
@pytest.mark.parametrize("spec_path", SPECS, ids=lambda p: Path(p).name)
def test_estimate_is_within_five_percent_of_the_runs_spend(spec_path, tmp_path):
    seeds = list(PROLIFIC_SEEDS) if spec_path.name == "prolific.yaml" else [None]
    estimates = estimate_spec(load_spec(spec_path))  # the spec's, whichever seed a run takes

    def one(seed: int | None) -> list[tuple[Decimal, Decimal]]:
        state = tmp_path / f"state-{seed}"
        run = run_campaign(*run_args(spec_path, state, seed=seed), cwd=tmp_path, timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
        return _spent(state, estimates)

    with ThreadPoolExecutor(max_workers=4) as pool:  # the runs are child processes: side by side
        runs = list(pool.map(one, seeds))
    for i, est in enumerate(estimates):
        works = [run[i][0] for run in runs]
        figure = est.expected if est.expected is not None else est.total
        work = sum(works, Decimal("0")) / len(works)
        print(f"{spec_path.name} {est.name}: estimate {est.total} (expected {est.expected}), spent on HITs "
              f"{' '.join(map(str, works))} (mean {work:.2f} over {len(works)} runs)")
        assert abs(work - figure) <= Decimal("0.05") * work, (est.name, figure, work)
        for spent, bonuses in (run[i] for run in runs):
            if est.hourly is None:  # per-HIT pay: the everyone-paid figure is never beaten (on Prolific a
                assert spent <= est.total  # rejected submission's place reopens and is paid to someone else)
            assert bonuses <= est.bonuses_at_most
