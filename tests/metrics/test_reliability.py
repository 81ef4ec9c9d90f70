from __future__ import annotations

import random

import pytest
from scipy import stats

from campaign.metrics.reliability import (
    is_repeat,
    item_means,
    original_key,
    pearson,
    repeat_key,
    retest_correlation,
    sample_hits,
    sample_size,
    spearman,
)


def test_keys_round_trip() -> None:
    assert is_repeat(repeat_key("likert-0003"))
    assert not is_repeat("likert-0003")
    assert original_key(repeat_key("likert-0003")) == "likert-0003"
    assert original_key("likert-0003") == "likert-0003"


@pytest.mark.parametrize(("n", "share", "want"), [(0, 0.1, 0), (12, 0.0, 0), (12, 0.1, 1), (12, 0.5, 6),
                                                  (3, 0.1, 1), (25, 0.1, 3), (10, 1.0, 10), (7, 0.25, 2)])
def test_sample_size(n: int, share: float, want: int) -> None:
    assert sample_size(n, share) == want


def test_sample_is_seeded_and_ignores_repeat_keys() -> None:
    keys = [f"likert-{i:04d}" for i in range(40)]
    a = sample_hits(keys, 0.1, seed=7, stage="likert")
    assert a == sample_hits(list(reversed(keys)) + [repeat_key(keys[0])], 0.1, seed=7, stage="likert")
    assert len(a) == 4 and a == sorted(a) and set(a) <= set(keys)
    others = {tuple(sample_hits(keys, 0.1, seed=s, stage="likert")) for s in range(20)}
    assert len(others) > 10  # really random across seeds
    assert sample_hits(keys, 0.1, seed=7, stage="ranking") != a or sample_hits(keys, 0.1, seed=8, stage="likert") != a


def test_pearson_and_spearman_match_scipy() -> None:
    rng = random.Random(3)
    for _ in range(20):
        n = rng.randint(3, 30)
        x = [rng.choice([1, 2, 3, 4, 5]) + rng.random() * 0.0 for _ in range(n)]  # ties on purpose
        y = [v + rng.gauss(0, 1.5) for v in x]
        if len(set(x)) < 2:
            continue
        assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
        assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)


def test_undefined_correlations_are_none() -> None:
    assert pearson([1.0, 2.0], [1.0, 2.0]) is None  # fewer than 3
    assert pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None  # no variance
    with pytest.raises(ValueError):
        pearson([1.0, 2.0, 3.0], [1.0])


def test_retest_uses_item_means_over_common_items() -> None:
    first = [("a", 1), ("a", 3), ("b", 4), ("b", 4), ("c", 5), ("d", 2), ("only-first", 5)]
    again = [("a", 2), ("b", 3), ("b", 5), ("c", 4), ("c", 5), ("d", 1), ("only-repeat", 1)]
    assert item_means(first)["a"] == 2.0
    r = retest_correlation(first, again)
    assert r.items == 4
    x, y = [2.0, 4.0, 5.0, 2.0], [2.0, 4.0, 4.5, 1.0]
    assert r.pearson == pytest.approx(stats.pearsonr(x, y)[0])
    assert r.spearman == pytest.approx(stats.spearmanr(x, y)[0])
    assert r.as_dict() == {"items": 4, "pearson": round(r.pearson, 4), "spearman": round(r.spearman, 4)}


def test_retest_of_independent_passes_is_near_zero_and_of_shared_truth_high() -> None:
    rng = random.Random(11)
    truth = {f"i{k}": rng.uniform(1, 5) for k in range(200)}
    noisy = [(i, t + rng.gauss(0, 0.8)) for i, t in truth.items() for _ in range(5)]
    noisy2 = [(i, t + rng.gauss(0, 0.8)) for i, t in truth.items() for _ in range(5)]
    unrelated = [(i, rng.uniform(1, 5)) for i in truth for _ in range(5)]
    high = retest_correlation(noisy, noisy2)
    low = retest_correlation(noisy, unrelated)
    assert high.items == 200 and high.pearson is not None and high.pearson > 0.85
    assert low.pearson is not None and abs(low.pearson) < 0.2
