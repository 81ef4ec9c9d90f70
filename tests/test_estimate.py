"""The cost estimate (`campaign.estimate`): printed by `validate`, priced by the marketplace's own fee
rules, a budget below it a warning that says how much it covers, and computed without any state."""

from __future__ import annotations

import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from campaign.estimate import describe, estimate_campaign, estimate_spec, places_for, plan_items
from campaign.money import MTURK_FEES
from campaign.spec import load_spec
from tests.support.cli import cli_output, run_campaign
from tests.support.paths import ROOT
from tests.support.specs import NO_CROWD, campaign, first_propositions, write_spec


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_campaign(*args, cwd=cwd)


def test_validate_prints_the_demo_estimate_and_creates_nothing(tmp_path):
    out = cli_output("validate", str(ROOT / "campaigns.yaml"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "cost estimate for water-bottles" in out.stdout
    # 60 propositions, 5 per HIT, 5 assignments at $0.06 + MTurk's 20% fee ($0.01 minimum)
    assert "stage likert (likert): 12 HITs, 60 assignments, rewards $3.60 + fees $0.60 = $4.20" in out.stdout
    assert "cost estimate for water-nuggets" in out.stdout
    assert list(tmp_path.iterdir()) == []


def _small(tmp_path: Path, budget: str, n: int = 30, assignments: int = 5) -> Path:
    """A Likert campaign over the first `n` demo propositions, 5 a HIT at $0.06, with no crowd."""
    task = {"kind": "likert", "items_per_hit": 5, "assignments": assignments, "reward": "0.06"}
    return write_spec(tmp_path / "spec.yaml", campaign("small", topic="t", propositions=first_propositions(tmp_path, n).name,
                                                       task=task, budget=budget, crowd=NO_CROWD, poll_interval=None))


def test_a_budget_below_the_estimate_is_a_warning_with_its_coverage(tmp_path):
    spec = _small(tmp_path, "1.00")
    out = cli_output("validate", str(spec), cwd=tmp_path)
    assert out.returncode == 0
    # 6 HITs x 5 x ($0.06 + $0.01) = $2.10; $1.00 covers 48% of it
    assert "total $2.10; budget $1.00" in out.stdout
    assert "warning: budget $1.00 is below the estimate $2.10: it covers about 48% of the campaign" in out.stdout
    assert "warning" not in cli_output("validate", str(_small(tmp_path, "2.10")), cwd=tmp_path).stdout


def test_mturk_fee_rules_apply_from_ten_assignments(tmp_path):
    spec = _small(tmp_path, "50.00", assignments=10)
    c = load_spec(spec).campaigns[0]
    est = estimate_campaign(c, plan_items(c))
    (s,) = est.stages
    assert (s.hits, s.assignments) == (6, 60)
    # 40% at >= 10 assignments: 0.024 -> $0.02 a assignment (at 5 assignments: 20%, the $0.01 minimum)
    assert s.fees == MTURK_FEES.assignment(Decimal("0.06"), 10).fee * 60 == Decimal("1.20")
    assert est.total == Decimal("3.60") + Decimal("1.20")


def test_prolific_is_priced_per_place_and_reports_hourly_pay():
    (est,) = estimate_spec(load_spec(ROOT / "examples" / "prolific.yaml"))
    assert est.currency == "GBP"
    likert, ranking = est.stages
    assert likert.places == 12  # 60 assignments in bundles of 5
    # the everyone-paid figure allows for up to 6 items tied at the shortlist's cut (36 candidates: 130 pairs)
    assert ranking.tied == 6 and ranking.pairs == 130 and ranking.places == places_for([4, 4, 4, 1], 5, 5) == 20
    assert likert.total == Decimal("1.05") * 12  # a place: 0.75 + fee 0.25 + VAT 0.05
    assert est.hourly == Decimal("9.00") and est.hourly_minimum == Decimal("6.00")
    text = "\n".join(describe(est))
    assert "reward per hour of estimated time: £9.00 (Prolific's minimum: £6.00/hour)" in text
    assert "bonuses at most £8.40" in text  # 30 participants x (0.20 + fee + VAT)


def test_replacing_excluded_answers_on_prolific_is_priced_at_most_the_allowance_per_hit():
    import dataclasses

    (campaign,) = load_spec(ROOT / "examples" / "prolific.yaml").campaigns
    on = dataclasses.replace(campaign, quality=dataclasses.replace(campaign.quality, replace_excluded=True))
    items = plan_items(campaign)
    base, more = estimate_campaign(campaign, items), estimate_campaign(on, items)
    for b, m in zip(base.stages, more.stages):
        assert b.extra == 0 and m.extra == b.hits * 2  # 5 assignments a HIT: at most 2 more each
        assert m.assignments == b.assignments  # the first answers are the same
        assert m.places == b.places + -(-m.extra // 5)  # places of their own, bundles of 5
        assert m.total == b.total + m.extra * m.extra_cost and m.extra_cost == Decimal("0.21")  # a fifth of £1.05
    assert more.total > base.total
    assert "at most 24 replacements" in "\n".join(describe(more))


def test_places_never_assume_a_submission_does_more_hits_than_a_batch_has():
    assert places_for([12], 5, 5) == 12
    assert places_for([2], 5, 5) == 5
    assert places_for([4, 4, 1], 5, 10) == 5 + 5 + 5


def test_run_with_an_unknown_campaign_estimates_nothing(tmp_path):
    spec = _small(tmp_path, "1.00")
    out = cli_output("run", "--config", str(spec), "--campaign", "nope", "--state", str(tmp_path / "state"), cwd=tmp_path)
    assert out.returncode == 2
    assert "cost estimate" not in out.stdout


@pytest.mark.slow
def test_run_prints_the_estimate_and_warns_of_a_short_budget_before_it_starts(tmp_path):
    spec = _small(tmp_path, "1.00")
    out = _cli("run", "--config", str(spec), "--state", str(tmp_path / "state"), "--max-seconds", "2", cwd=tmp_path)
    assert "cost estimate for small" in out.stdout
    assert out.stdout.index("cost estimate for small") < out.stdout.index("worker site for small")
    assert "covers about 48% of the campaign" in out.stderr


def test_ties_at_a_shortlists_cut_are_priced_as_the_run_plans_them():
    """A ranking stage ranks its source's top `shortlist` items and every item tied with the last (seed
    000 §5.4); its pair budget is a share of the candidates' pairs, so ties make it post more HITs. The
    examples' runs (seeds 0-9) shortlisted 30-35 of 60 and posted 9-12 ranking HITs where the estimate
    planned 9 for every run. Now: the estimate's plan for k ties is the run's plan from scores with k
    ties, and its expected cost is over the ties' distribution."""
    from campaign.estimate import stage_batches
    from campaign.tasks import get as get_kind

    c = load_spec(ROOT / "examples" / "prolific.yaml").campaigns[0]
    likert, ranking = c.stages
    items = plan_items(c)

    class Scores:  # the run's StageData as far as `candidates` reads it: Likert means with 5 ties at the cut
        campaign = c

        def items(self) -> list[str]:
            return [it.key for it in items]

        def scores(self, stage: str) -> list[dict]:
            values = [5.0 - 0.1 * i for i in range(29)] + [2.0] * 6 + [1.8 - 0.01 * i for i in range(25)]
            return [{"item": it.key, "score": v} for it, v in zip(items, values, strict=True)]

    candidates = get_kind("ranking").candidates(ranking, Scores())
    assert len(candidates) == 35  # 29 above, the 30th and its 5 ties
    batches, pairs = stage_batches(c, ranking, items, 0, tied=5)
    assert ([len(b) for b in batches], pairs) == ([4, 4, 3, 1], 120)  # what seed 1's run posted (35 shortlisted)
    assert [len(b) for b in stage_batches(c, ranking, items, 0)[0]] == [4, 4, 1]  # no tie: 87-pair budget

    (est,) = estimate_spec(load_spec(ROOT / "examples" / "prolific.yaml"))
    r = est.stages[1]
    assert r.fewest_hits == 9 and r.hits == 13 and r.expected_hits == Decimal("10.0")
    # 10 HITs to expect at £0.21 a HIT assignment (a place's £1.05 over its 5 HITs), to the penny
    assert r.expected_total is not None and abs(r.expected_total - Decimal("0.21") * 5 * 10) <= Decimal("0.10")
    assert "9-13 HITs as up to 6 more items tie at the cut" in "\n".join(describe(est))


def test_tie_distribution_of_a_likert_cut():
    from campaign.estimate import tie_distribution, tie_points, tie_quantile

    dist = tie_distribution(60, 30, 21)  # 60 items, 5 ratings on a 5-point scale, cut at 30
    assert abs(sum(dist) - 1) < 1e-3
    mean = sum(k * p for k, p in enumerate(dist))
    assert 1.3 < mean < 1.6  # runs of the examples: 1.2 (two-stage, 12 seeds) and 1.6 (Prolific, 10 seeds)
    assert dist[0] < 0.5 and tie_quantile(dist, 0.99) == 6
    assert tie_distribution(60, 30, 1) == [1.0] and tie_distribution(60, 60, 21) == [1.0]
    assert tie_distribution(60, 30, 1000)[0] > 0.9  # a fine grid: ties are rare
    wide = tie_distribution(5000, 500, 21)
    points = tie_points(wide)
    assert len(points) <= 24 and abs(sum(p for _, p in points) - sum(wide)) < 1e-9
    ((k, p),) = tie_points(wide, 1)  # a large stage is planned once more, at the ties' mean
    assert k == round(sum(k * p for k, p in enumerate(wide)) / sum(wide)) and p == pytest.approx(sum(wide))


def test_binomial_pmf_is_scipys_binomial_including_the_edges():
    import numpy as np
    from scipy.stats import binom

    from campaign.estimate import binomial_pmf

    k = np.arange(-3, 70)[None, :]
    n = np.array([0, 1, 7, 60, 64])[:, None]
    for p in (0.0, 1.0, 1 / 21, 0.5, 20 / 21):
        assert np.allclose(binomial_pmf(k, n, p), binom.pmf(k, n, p), rtol=1e-9, atol=1e-15), p
    assert binomial_pmf(np.array([61]), np.array([60]), 0.5)[0] == 0.0


def test_expected_spammers_are_the_crowds_own_count():
    """30 workers at 15% + 10% spammers are 7 (largest remainder gives the odd worker to `noisy`), not
    7.5: the estimate counts them as the crowd allots them."""
    from campaign.crowd.models import SPAMMER_KINDS, make_pool
    from campaign.estimate import spammer_share
    from campaign.simulation import allot

    c = load_spec(ROOT / "examples" / "prolific.yaml").campaigns[0]
    pool = make_pool(c.crowd.workers, 3, dict(c.crowd.mix))
    spammers = sum(1 for w in pool if w.kind in SPAMMER_KINDS)
    assert spammers == 7 == sum(n for k, n in allot(30, dict(c.crowd.mix)).items() if k in SPAMMER_KINDS)
    assert spammer_share(c) == pytest.approx(7 / 30)


def test_a_budget_short_only_of_the_worst_case_replacements_says_so(tmp_path):
    """The demo's nugget campaign: $40.00 pays for every first assignment ($34.16) but not for all 122
    replacement slots the estimate allows ($43.92 at most). The warning said the run would stop at
    budget_exhausted; it spends $36.88 and finishes."""
    out = cli_output("validate", str(ROOT / "campaigns.yaml"), cwd=tmp_path)
    assert out.returncode == 0
    assert ("warning: budget $40.00 pays for every first assignment ($34.16) but not for every replacement of a "
            "refused answer the estimate allows ($43.92 at most)") in out.stdout
    assert "the run will stop" not in out.stdout
