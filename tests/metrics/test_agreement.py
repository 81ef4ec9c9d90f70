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
