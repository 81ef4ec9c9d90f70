import numpy as np
import pytest

from campaign.plan.pack import coverage, pack_pairs, pairs_of_hit


def _check(hits, pairs):
    for h in hits:
        assert len(h) == 5 and len(set(h)) == 5
    assert coverage(hits, pairs) == 1.0


def test_covers_every_pair_with_distinct_items():
    rng = np.random.default_rng(0)
    items = list(range(40))
    pairs = []
    while len(pairs) < 100:
        a, b = (int(x) for x in rng.choice(items, 2, replace=False))
        pairs.append((a, b))
    hits = pack_pairs(pairs)
    _check(hits, pairs)
    assert len(hits) < len(pairs)  # packing shares HITs between pairs


def test_clique_packs_into_one_hit_and_is_deterministic():
    pairs = [(a, b) for a in "abcde" for b in "abcde" if a < b]
    hits = pack_pairs(pairs)
    assert len(hits) == 1 and set(hits[0]) == set("abcde")
    assert pack_pairs(pairs) == hits


def test_fill_and_max_hits():
    hits = pack_pairs([("a", "b")], fill=["x", "y", "z", "w"])
    assert hits == [("a", "b", "x", "y", "z")]
    many = [(f"a{i}", f"b{i}") for i in range(10)]
    assert len(pack_pairs(many, max_hits=2)) == 2
    best = pack_pairs([(1, 2), (1, 3), (2, 3), (1, 4), (7, 8)], fill=[9, 10, 11], max_hits=1)
    assert {1, 2, 3, 4} <= set(best[0])  # the densest group comes first
    with pytest.raises(ValueError):
        pack_pairs([("a", "b")])  # too few items for a 5-item HIT
    assert len(pairs_of_hit("abcde")) == 10
