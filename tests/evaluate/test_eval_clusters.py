"""Clustering measures (seed 003): hand-computed cases and scikit-learn (test-only dependency) to 1e-9."""

from __future__ import annotations

import math
import random

import pytest
from sklearn import metrics  # the `test` extra (pip install -e '.[test]'); a missing one must fail, not skip

from campaign.evaluate.clusters import compare, v_beta


def _as_maps(gold, pred):
    return {i: g for i, g in enumerate(gold)}, {i: p for i, p in enumerate(pred)}


def _vi_from_sklearn(gold, pred):
    """VI = H(C) + H(L) - 2 I in nats, with H(X) = I(X; X) from sklearn."""
    mi = metrics.mutual_info_score
    return mi(gold, gold) + mi(pred, pred) - 2 * mi(gold, pred)


def _check_against_sklearn(gold, pred, beta=None):
    s = compare(*_as_maps(gold, pred), beta=beta)
    h, c, v = metrics.homogeneity_completeness_v_measure(gold, pred)
    b = len(set(pred)) / len(set(gold)) if beta is None else beta
    assert s.homogeneity == pytest.approx(h, abs=1e-9)
    assert s.completeness == pytest.approx(c, abs=1e-9)
    assert s.v_measure == pytest.approx(v, abs=1e-9)
    assert s.v_beta == pytest.approx(metrics.v_measure_score(gold, pred, beta=b), abs=1e-9)
    assert s.nmi == pytest.approx(metrics.normalized_mutual_info_score(gold, pred, average_method="arithmetic"), abs=1e-9)
    assert s.mutual_information == pytest.approx(metrics.mutual_info_score(gold, pred), abs=1e-9)
    assert s.vi == pytest.approx(_vi_from_sklearn(gold, pred), abs=1e-9)
    assert s.rand == pytest.approx(metrics.rand_score(gold, pred), abs=1e-9)
    assert s.adjusted_rand == pytest.approx(metrics.adjusted_rand_score(gold, pred), abs=1e-9)


@pytest.mark.parametrize("seed", range(40))
def test_random_clusterings_match_sklearn(seed):
    rng = random.Random(seed)
    n = rng.randint(2, 200)
    k_gold, k_pred = rng.randint(1, 12), rng.randint(1, 15)
    gold = [rng.randrange(k_gold) for _ in range(n)]
    pred = [rng.randrange(k_pred) for _ in range(n)]
    _check_against_sklearn(gold, pred)
    _check_against_sklearn(gold, pred, beta=rng.choice([0.25, 0.5, 2.0, 3.7]))  # beta=0 divides by zero in sklearn when c = 0


@pytest.mark.parametrize("gold,pred", [
    ([0] * 6, [0] * 6),                       # one class, one cluster
    ([0] * 6, list(range(6))),                # C_one vs L_single
    (list(range(6)), [0] * 6),
    (list(range(6)), list(range(6))),
    ([0, 0, 1, 1], [1, 1, 0, 0]),            # same partition, other names
    ([0, 1], [0, 0]),
])
def test_degenerate_partitions_match_sklearn(gold, pred):
    _check_against_sklearn(gold, pred)


def test_hand_computed_case():
    # classes {a,b,c} {d,e,f}; clusters {a,b} {c,d} {e,f}
    s = compare(*_as_maps([0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 2, 2]))
    ln2, ln3 = math.log(2), math.log(3)
    assert s.homogeneity == pytest.approx(2 / 3)                       # H(C|L) = ln2/3, H(C) = ln2
    assert s.completeness == pytest.approx(2 / 3 * ln2 / ln3)          # H(L|C) = ln3 - 2/3 ln2, H(L) = ln3
    h, c = 2 / 3, 2 / 3 * ln2 / ln3
    assert s.v_measure == pytest.approx(2 * h * c / (h + c))
    assert s.beta == 1.5 and s.v_beta == pytest.approx(2.5 * h * c / (1.5 * h + c))
    assert s.vi == pytest.approx(ln2 / 3 + ln3 - 2 / 3 * ln2)
    assert s.rand == pytest.approx(10 / 15)                           # TP 2, FP 1, FN 4, TN 8
    assert s.adjusted_rand == pytest.approx(8 / 33)                   # (2 - 1.2) / (4.5 - 1.2)


def test_seed_003_properties():
    gold = [0, 0, 0, 1, 1, 2, 2, 2, 2]
    pred = [0, 0, 1, 1, 1, 2, 2, 3, 3]
    s = compare(*_as_maps(gold, pred))
    assert s.nmi == pytest.approx(s.v_measure)                # eq. 6: V_1 = NMI
    assert s.v_beta == pytest.approx(v_beta(s.homogeneity, s.completeness, 4 / 3))
    assert compare(*_as_maps(gold, gold)).vi == 0 and compare(*_as_maps(gold, gold)).v_measure == 1
    n = 9
    worst = compare(*_as_maps([0] * n, list(range(n))))       # VI(L_single, C_one) = log N, the maximum
    assert worst.vi == pytest.approx(math.log(n)) and worst.nvi == pytest.approx(1.0)
    assert 0 <= s.nvi < 1
    # beta > 1 favours completeness: a clustering with completeness > homogeneity gains
    split = compare(*_as_maps([0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 1, 1]))
    assert split.completeness > split.homogeneity
    assert compare(*_as_maps([0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 1, 1]), beta=3).v_beta > split.v_measure


def test_items_must_match():
    with pytest.raises(ValueError, match="different items"):
        compare({"a": 1, "b": 1}, {"a": 1, "c": 1})


def test_beta_zero_is_homogeneity():
    s = compare(*_as_maps([0, 0, 1, 1, 2], [0, 0, 0, 1, 1]), beta=0)
    assert s.v_beta == pytest.approx(s.homogeneity)
