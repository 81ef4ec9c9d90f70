"""Hierarchy overlap (seed 002 §4.3) and its worked example (Figure 4, HO(X) = 0.85)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from campaign.evaluate.hierarchy import Hierarchy, hierarchy_overlap


def chain_forest(edges: list[tuple[str, str]], nodes: Sequence[str]) -> Hierarchy:
    """One nugget per node, named like the node."""
    parent: dict[str, str | None] = {n: None for n in nodes}
    for p, c in edges:
        parent[c] = p
    return Hierarchy(parent=parent, nuggets={n: [n] for n in nodes})


# Figure 4 as its prose describes it: SC(X) = {A,B,C,D,E} in both; supersets {A,B} and {A,D,E}; subsets {C,D,E} and {B,C}
H1 = chain_forest([("A", "B"), ("B", "X"), ("X", "C"), ("X", "D"), ("D", "E")], "ABXCDE")
H2 = chain_forest([("A", "D"), ("D", "E"), ("E", "X"), ("X", "B"), ("B", "C")], "ADEXBC")


def test_seed_example_nugget_x():
    s = hierarchy_overlap(H1, H2)
    x = s.per_nugget["X"]
    assert (x.to, x.supo, x.subo) == (1.0, 0.25, 0.25)
    assert 0.8 * x.to + 0.1 * x.supo + 0.1 * x.subo == pytest.approx(0.85)


def test_seed_example_averaged_over_all_nuggets_by_hand():
    s = hierarchy_overlap(H1, H2)
    assert s.to == pytest.approx(13 / 15)       # C 3/5, D 4/5, E 4/5, the rest 1
    assert s.supo == pytest.approx(22 / 45)     # A 1 (roots in both), B 1/4, X 1/4, C 3/5, D 1/3, E 1/2
    assert s.subo == pytest.approx(11 / 24)     # A 1, B 1/4, X 1/4, C 1 (leaf in both), D 1/4, E 0
    assert s.ho == pytest.approx(0.8 * 13 / 15 + 0.1 * 22 / 45 + 0.1 * 11 / 24)
    assert hierarchy_overlap(H2, H1).ho == pytest.approx(s.ho)  # symmetric


def test_reversed_chain_is_a_perfect_taxonomy_match_but_not_a_hierarchy_match():
    down = chain_forest([("v1", "v2"), ("v2", "v3")], ["v1", "v2", "v3"])
    up = chain_forest([("v3", "v2"), ("v2", "v1")], ["v1", "v2", "v3"])
    s = hierarchy_overlap(down, up)
    assert (s.to, s.supo, s.subo) == (1.0, 0.0, 0.0) and s.ho == pytest.approx(0.8)
    assert hierarchy_overlap(down, down).ho == pytest.approx(1.0)


def test_facet_trees_and_redundant_nuggets():
    # two facet trees; node n1 holds two redundant nuggets
    h = Hierarchy(parent={"n1": None, "n2": "n1", "m1": None}, nuggets={"n1": ["a", "b"], "n2": ["c"], "m1": ["d"]})
    g = Hierarchy(parent={"k1": None, "k2": None, "k3": None}, nuggets={"k1": ["a", "b", "c"], "k2": [], "k3": ["d"]})
    s = hierarchy_overlap(h, g, a=1.0, b=0.0, c=0.0)
    # a: SC {b, c} vs {b, c}; c: SC {a, b} vs {a, b}; d alone in both -> 1
    assert s.per_nugget["a"].to == 1.0 and s.per_nugget["c"].to == 1.0 and s.per_nugget["d"].to == 1.0
    assert s.per_nugget["c"].supo == 0.0  # {a, b} above it vs nothing
    assert s.ho == pytest.approx(1.0)


@pytest.mark.parametrize("parent,nuggets,msg", [
    ({"a": "b", "b": "a"}, {"a": ["x"], "b": ["y"]}, "cycle"),
    ({"a": "zz"}, {"a": ["x"]}, "unknown parent"),
    ({"a": None, "b": None}, {"a": ["x"], "b": ["x"]}, "two nodes"),
])
def test_malformed_hierarchies_are_refused(parent, nuggets, msg):
    with pytest.raises(ValueError, match=msg):
        Hierarchy(parent=parent, nuggets=nuggets)


def test_different_nugget_sets_are_refused():
    with pytest.raises(ValueError, match="different nuggets"):
        hierarchy_overlap(chain_forest([], "AB"), chain_forest([], "AC"))
