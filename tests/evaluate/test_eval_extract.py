"""TSC3 measures against seed 001's worked examples (Table 1 and §3.1.2-3.1.4)."""

from __future__ import annotations

import itertools

import pytest

from campaign.evaluate.extract import AbstractSentence, minimal_extract, score_extract

# Table 1: abstract sentence 1 <- {s1} or {s10, s11}; 2 <- {s3, s4, s5}; 3 <- {s20, s21, s23} or {s1, s30, s50};
# ranked A, B, C as in the weighted-coverage example.
TABLE1 = [
    AbstractSentence("1", "A", (frozenset({"s1"}), frozenset({"s10", "s11"}))),
    AbstractSentence("2", "B", (frozenset({"s3", "s4", "s5"}),)),
    AbstractSentence("3", "C", (frozenset({"s20", "s21", "s23"}), frozenset({"s1", "s30", "s50"}))),
]
OUT1 = ["s10", "s11", "s4", "s16", "s50", "s51"]
OUT2 = ["s1", "s10", "s11", "s3", "s4", "s50"]


def test_minimal_extract_is_the_seeds_six_sentences():
    assert minimal_extract(TABLE1) == {"s1", "s3", "s4", "s5", "s30", "s50"}


def test_precision_examples():
    s1, s2 = score_extract(TABLE1, OUT1), score_extract(TABLE1, OUT2)
    assert (s1.correct, s1.required_length) == (4, 6) and s1.precision == pytest.approx(4 / 6)
    assert round(s1.precision, 3) == 0.667
    assert s2.precision == 1.0


def test_coverage_examples_0553_and_0780():
    s1, s2 = score_extract(TABLE1, OUT1), score_extract(TABLE1, OUT2)
    assert [e for _, e in s1.per_sentence] == pytest.approx([1, 1 / 3, 1 / 3])
    assert [e for _, e in s2.per_sentence] == pytest.approx([1, 2 / 3, 2 / 3])
    # the seed rounds each e(i) to two decimals before averaging
    assert round(sum(round(e, 2) for _, e in s1.per_sentence) / 3, 3) == 0.553
    assert round(sum(round(e, 2) for _, e in s2.per_sentence) / 3, 3) == 0.780
    assert s1.coverage == pytest.approx(5 / 9) and s2.coverage == pytest.approx(7 / 9)


def test_weighted_coverage_example():
    s = score_extract(TABLE1, OUT1)
    # (w(A)·1 + w(B)·1/3 + w(C)·1/3) / (w(A) + w(B) + w(C)) with w = 1/rank
    assert s.weighted_coverage == pytest.approx(23 / 33)
    assert round(s.weighted_coverage, 3) == 0.697
    # the example's printed weights (C as 0.3) give the same structure
    assert score_extract(TABLE1, OUT1, {"A": 1, "B": 0.5, "C": 0.3}).weighted_coverage == pytest.approx((1 + 0.8 / 3) / 1.8)


def test_full_extract_scores_one_and_weights_matter_only_for_partial_outputs():
    best = ["s1", "s3", "s4", "s5", "s30", "s50"]
    s = score_extract(TABLE1, best)
    assert (s.precision, s.coverage, s.weighted_coverage) == (1.0, 1.0, 1.0)
    only_c = score_extract(TABLE1, ["s20", "s21", "s23"])
    only_a = score_extract(TABLE1, ["s1"])
    assert only_c.coverage == pytest.approx(1 / 3) and only_a.coverage == pytest.approx(4 / 9)  # s1 also fills 1/3 of set 3b
    assert only_c.weighted_coverage < only_c.coverage  # a C sentence is worth less
    assert only_a.weighted_coverage > only_a.coverage


def test_minimal_extract_matches_brute_force():
    import random

    rng = random.Random(3)
    for _ in range(200):
        gold = []
        for i in range(rng.randint(1, 4)):
            sets = tuple(frozenset(f"s{rng.randint(0, 7)}" for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(1, 3)))
            gold.append(AbstractSentence(str(i), "A", sets))
        best = min(len(frozenset().union(*choice)) for choice in itertools.product(*(g.sets for g in gold)))
        got = minimal_extract(gold)
        assert len(got) == best
        assert all(any(g <= got for g in s.sets) for s in gold)


def test_repeats_count_once_and_bad_weights_are_refused():
    assert score_extract(TABLE1, OUT2 + ["s1"]).precision == 1.0
    with pytest.raises(ValueError, match="no weight"):
        score_extract(TABLE1, OUT1, {"A": 1, "B": 0.5})
