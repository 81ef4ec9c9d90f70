import numpy as np
import pytest

from campaign.metrics.agreement import alpha_u, binary_token_counts, fleiss, observed_expected, percentage_agreement

# Krippendorff (2004, Content Analysis, p. 254): two coders on the continuum [150, 450), categories c and k,
# as (coder, begin, length, category).
KRIPPENDORFF_2004 = [
    (0, 225, 70, "c"), (0, 370, 30, "c"), (1, 220, 80, "c"), (1, 355, 20, "c"), (1, 400, 20, "c"),
    (0, 180, 60, "k"), (0, 300, 50, "k"), (1, 180, 60, "k"), (1, 300, 50, "k"),
]


def test_alpha_u_reproduces_krippendorff_2004():
    overall, per_cat = alpha_u(KRIPPENDORFF_2004, [0, 1], begin=150, length=300)
    assert overall == pytest.approx(0.8591, abs=0.0005)
    assert per_cat["c"] == pytest.approx(0.7286, abs=0.0001)
    assert per_cat["k"] == pytest.approx(1.0, abs=0.0001)
    d_o, d_e = observed_expected(KRIPPENDORFF_2004, [0, 1], 150, 300, "c")
    assert (round(d_o, 4), round(d_e, 4)) == (0.0144, 0.0532)
    assert round(observed_expected(KRIPPENDORFF_2004, [0, 1], 150, 300, "k")[1], 4) == 0.0490


def test_alpha_u_perfect_and_disjoint():
    same = [(0, 10, 5, "x"), (1, 10, 5, "x")]
    assert alpha_u(same, [0, 1], 0, 50)[0] == pytest.approx(1.0)
    apart = [(0, 0, 10, "x"), (1, 30, 10, "x")]
    assert alpha_u(apart, [0, 1], 0, 50)[0] < 0


def test_fleiss_kappa_textbook_example():
    # the 10 subjects x 5 categories, 14 raters example used to explain Fleiss' kappa
    table = np.array([[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                      [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]])
    p_bar, kappa = fleiss(table)
    assert p_bar == pytest.approx(0.378, abs=0.001)
    assert kappa == pytest.approx(0.210, abs=0.001)


def test_binary_token_counts_treat_absent_raters_as_unmarked():
    counts = binary_token_counts(np.array([0, 7, 3]), raters=7)
    assert counts.tolist() == [[7, 0], [0, 7], [4, 3]]
    p_bar, _ = fleiss(counts)
    assert p_bar == pytest.approx((1 + 1 + (4 * 3 + 3 * 2) / 42) / 3)
    with pytest.raises(ValueError):
        binary_token_counts(np.array([8]), raters=7)


def test_percentage_agreement():
    assert percentage_agreement({"a": [1, 1, 1], "b": [1, 2], "c": [5]}) == pytest.approx(0.5)


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 coders, 12 units, missing values
# (None); nominal alpha = 0.743.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def _triples(table):
    return [(u, c, v) for c, row in enumerate(table) for u, v in enumerate(row) if v is not None]


def test_nominal_alpha_textbook_value_with_missing_data():
    from campaign.metrics.agreement import nominal_alpha

    assert nominal_alpha(_triples(KRIPPENDORFF_2011)) == pytest.approx(0.743, abs=5e-4)
    by_unit = {}
    for u, _, v in _triples(KRIPPENDORFF_2011):
        by_unit.setdefault(u, []).append(v)
    assert nominal_alpha(by_unit) == pytest.approx(0.7434210526, abs=1e-9)


def test_nominal_alpha_matches_the_krippendorff_package_on_random_sparse_data():
    krippendorff = pytest.importorskip("krippendorff", reason="test extra: pip install -e '.[test]'")
    from campaign.metrics.agreement import nominal_alpha

    rng = np.random.default_rng(5)
    for trial in range(20):
        coders, units, k = int(rng.integers(2, 8)), int(rng.integers(5, 60)), int(rng.integers(2, 6))
        truth = rng.integers(0, k, units)
        table = np.where(rng.random((coders, units)) < 0.7, truth, rng.integers(0, k, (coders, units))).astype(float)
        table[rng.random((coders, units)) < 0.35] = np.nan  # missing ratings
        if np.sum(~np.isnan(table).all(axis=0) & (np.sum(~np.isnan(table), axis=0) >= 2)) < 2 or len(set(table[~np.isnan(table)])) < 2:
            continue
        ref = krippendorff.alpha(reliability_data=table, level_of_measurement="nominal")
        ours = nominal_alpha([(u, c, table[c, u]) for c in range(coders) for u in range(units) if not np.isnan(table[c, u])])
        assert ours == pytest.approx(ref, abs=1e-9), trial


def test_fleiss_accepts_unequal_rater_counts_and_reduces_to_fleiss_1971_when_equal():
    # equal counts: unchanged (the textbook example above)
    equal = np.array([[2, 1, 0], [0, 3, 0], [1, 1, 1], [3, 0, 0]])
    p_equal, k_equal = fleiss(equal)
    assert p_equal == pytest.approx((1 / 3 + 1 + 0 + 1) / 4)
    # unequal: each item's agreement over its own pairs; one-rater items left out
    unequal = np.array([[2, 1, 0], [0, 3, 0], [1, 1, 0], [4, 0, 0], [0, 0, 1]])
    p_bar, kappa = fleiss(unequal)
    assert p_bar == pytest.approx((1 / 3 + 1 + 0 + 1) / 4)
    shares = np.array([7, 5, 0]) / 12
    assert kappa == pytest.approx((p_bar - np.sum(shares ** 2)) / (1 - np.sum(shares ** 2)))
    with pytest.raises(ValueError):
        fleiss(np.array([[1, 0], [0, 1]]))


def test_categorical_agreement_reports_alpha_beside_kappa():
    from campaign.metrics.agreement import categorical_agreement

    out = categorical_agreement(_triples(KRIPPENDORFF_2011))
    assert out["krippendorff_alpha"] == pytest.approx(0.7434, abs=1e-4)
    assert out["items"] == 12 and out["items_with_two_or_more"] == 11 and out["labels"] == 41
    assert 0 < out["fleiss_kappa"] < 1 and 0 < out["percent_agreement"] <= 1
    same = categorical_agreement([(u, c, "x") for u in range(5) for c in range(3)])
    assert same["krippendorff_alpha"] is None and same["fleiss_kappa"] is None and same["percent_agreement"] == 1.0
    assert categorical_agreement([(1, "a", "x"), (2, "b", "y")])["fleiss_kappa"] is None
