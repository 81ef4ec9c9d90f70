"""The ranking stage's scores with its source stage's evidence (`campaign.aggregate.source_prior`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from campaign.aggregate.source_prior import MIN_ITEMS, combine
from campaign.bench.prior import run
from campaign.paths import shared_data_dir


def _draw(rng: np.random.Generator, n: int, comparison_sd: float, source_sd: float, related: bool = True):
    theta = rng.normal(0.0, 1.0, n)
    y = theta + rng.normal(0.0, comparison_sd, n)
    x = (3.0 + 0.8 * theta if related else 3.0 + 0.8 * rng.normal(0.0, 1.0, n)) + rng.normal(0.0, source_sd, n)
    items = [f"i{k}" for k in range(n)]
    comparison = {k: (float(a), comparison_sd) for k, a in zip(items, y)}
    source = {k: (float(b), source_sd) for k, b in zip(items, x)}
    return theta, items, comparison, source


def test_an_informative_source_improves_the_order_of_noisy_comparisons():
    rng = np.random.default_rng(7)
    plain_r, combined_r, used = [], [], 0
    for _ in range(120):
        theta, items, comparison, source = _draw(rng, 30, comparison_sd=0.7, source_sd=0.5)
        got = combine(comparison, source)
        used += got.combined
        assert got.slope > 0 or not got.combined
        plain_r.append(spearmanr([comparison[k][0] for k in items], theta)[0])
        combined_r.append(spearmanr([got.scores[k] for k in items], theta)[0])
    # two independent measurements of the same thing order it better than either alone; a draw whose
    # source happens to correlate weakly with the comparisons (r ~0.4 over 30 items) is left alone
    assert used >= 108
    assert np.mean(combined_r) > np.mean(plain_r) + 0.03


def test_an_unrelated_source_costs_next_to_nothing():
    rng = np.random.default_rng(8)
    loss, used = [], 0
    for _ in range(120):
        theta, items, comparison, source = _draw(rng, 30, comparison_sd=0.7, source_sd=0.5, related=False)
        got = combine(comparison, source)
        used += got.combined
        plain = spearmanr([comparison[k][0] for k in items], theta)[0]
        loss.append(plain - spearmanr([got.scores[k] for k in items], theta)[0])
    assert used <= 4  # the evidence test lets about one unrelated source in a hundred through
    assert np.mean(loss) < 0.002


def test_a_source_that_contradicts_the_comparisons_is_not_used_as_a_predictor():
    rng = np.random.default_rng(9)
    theta, items, comparison, _ = _draw(rng, 30, comparison_sd=0.5, source_sd=0.1)
    source = {k: (-float(t), 0.1) for k, t in zip(items, theta)}  # exactly backwards
    got = combine(comparison, source)
    assert got.slope == 0.0
    order = sorted(items, key=lambda k: -got.scores[k])
    assert order == sorted(items, key=lambda k: -comparison[k][0])  # equal errors: the comparisons' own order


def test_the_uncertainty_falls_and_items_without_a_source_score_keep_theirs():
    rng = np.random.default_rng(10)
    _, items, comparison, source = _draw(rng, 40, comparison_sd=0.8, source_sd=0.2)
    del source[items[0]]
    source[items[1]] = (float("nan"), 0.2)
    got = combine(comparison, source)
    assert got.combined and got.items_used == 38
    for k in items[:2]:
        assert got.scores[k] == comparison[k][0] and got.stderr[k] == comparison[k][1]
    assert all(got.stderr[k] < comparison[k][1] for k in items[2:])


def test_too_few_items_or_a_constant_source_leave_the_comparisons_alone():
    few = {f"i{k}": (float(k), 0.5) for k in range(MIN_ITEMS - 1)}
    got = combine(few, {k: (float(v[0]), 0.1) for k, v in few.items()})
    assert not got.combined and got.scores == {k: v[0] for k, v in few.items()}
    many = {f"i{k}": (float(k) / 3, 0.5) for k in range(12)}
    flat = combine(many, {k: (4.0, 0.2) for k in many})
    assert flat.slope == 0.0
    assert sorted(many, key=lambda k: -flat.scores[k]) == sorted(many, key=lambda k: -many[k][0])


def test_values_beyond_floating_point_leave_the_comparisons_alone():
    comparison = {f"i{k}": (1e200 * k, 1e-200) for k in range(8)}
    got = combine(comparison, {k: (1e300 * n, 1e150) for n, k in enumerate(comparison)})
    assert all(np.isfinite(list(got.scores.values()))) and all(np.isfinite(list(got.stderr.values())))


_ANY = st.floats(allow_nan=True, allow_infinity=True)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.text(max_size=3), st.tuples(_ANY, _ANY), max_size=12),
       st.dictionaries(st.text(max_size=3), st.tuples(_ANY, _ANY), max_size=12))
def test_any_numbers_give_scores_and_never_an_exception(comparison, source):
    got = combine(comparison, source)
    assert set(got.scores) == set(comparison) == set(got.stderr)
    for k, (score, se) in comparison.items():  # a finite comparison score stays finite
        if math.isfinite(score) and math.isfinite(se) and se > 0:
            assert math.isfinite(got.scores[k]) and math.isfinite(got.stderr[k])


def test_the_same_inputs_give_the_same_scores():
    rng = np.random.default_rng(11)
    _, _, comparison, source = _draw(rng, 25, comparison_sd=0.6, source_sd=0.4)
    assert combine(comparison, source) == combine(dict(reversed(list(comparison.items()))), source)


@pytest.mark.skipif(shared_data_dir() is None, reason="needs ../shared/data (real crowd data), absent on a fresh clone")
def test_on_real_judgements_a_second_measurement_helps_as_pooling_does_and_an_unrelated_one_costs_nothing():
    """UKPConvArg1's real pairwise judgements, two disjoint 15% shares a topic (campaign.bench.prior)."""
    got = run(share=0.15, draws=1)
    assert got is not None
    m = got["methods"]
    assert m["B + A"]["minus_B_alone"] > 0.02  # measured +0.035 (SE 0.004) over 3 draws
    assert m["B + A"]["spearman"] > m["A ∪ B pooled"]["spearman"] - 0.01  # as good as one fit of both shares
    assert abs(m["B + shuffled A"]["minus_B_alone"]) < 0.005
    assert m["B + A"]["spearman"] > m["majority wins"]["spearman"]
