"""Hierarchy overlap between two nugget hierarchies (seed 002, Tauchmann et al. 2018, §4.3).

A hierarchy is a forest of nodes; each node holds one or more nuggets (nuggets in one node are
redundant with each other), and an edge runs from a more general node to a more specific one. The
reading of the seed's definitions, fixed by its worked example (Figure 4: SC(X) = {A, B, C, D, E} in
both hierarchies, supersets {A} of {A, B, D, E}, subsets {C} of {B, C, D, E}, HO(X) = 0.85):

- SupS(n, H): the nuggets of the strict ancestors of n's node; SubS(n, H): those of its strict
  descendants. SC(n, H), the semantic cotopy, is SupS ∪ SubS plus the other nuggets of n's own node.
  n itself is never in them (the example's sets leave X out; with X in, SupO would be 2/5, not 1/4).
- TO(n, H1, H2) = |SC(n,H1) ∩ SC(n,H2)| / |SC(n,H1) ∪ SC(n,H2)| (Maedche & Staab's taxonomy overlap);
  SupO and SubO are the same ratio over SupS and SubS. When both sets are empty (n is a root, a leaf or
  alone in both) the hierarchies agree about n and the ratio is 1.
- TO(H1, H2), SupO(H1, H2), SubO(H1, H2) average the per-nugget values over the nugget set N, and
  HO = a·TO + b·SupO + c·SubO with the seed's a = 0.8, b = c = 0.1. HO is in [0, 1] when a + b + c = 1.
  A reversed chain v1 > v2 > v3 against v3 > v2 > v1 has TO = 1 but SupO = SubO = 0, so HO = a.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Hierarchy:
    """`parent` maps every node to its parent node (None for a facet tree's root); `nuggets` every node
    to the nuggets it holds."""

    parent: Mapping[str, str | None]
    nuggets: Mapping[str, Sequence[str]]

    def __post_init__(self) -> None:
        seen: dict[str, str] = {}
        for node, ns in self.nuggets.items():
            if node not in self.parent:
                raise ValueError(f"node {node!r} holds nuggets but is not in the hierarchy")
            for n in ns:
                if n in seen and seen[n] != node:
                    raise ValueError(f"nugget {n!r} is in two nodes: {seen[n]!r} and {node!r}")
                seen[n] = node
        for node, p in self.parent.items():
            if p is not None and p not in self.parent:
                raise ValueError(f"node {node!r} has an unknown parent {p!r}")
        for node in self.parent:
            path = {node}
            p = self.parent[node]
            while p is not None:
                if p in path:
                    raise ValueError(f"node {node!r} is on a cycle")
                path.add(p)
                p = self.parent[p]

    def node_of(self) -> dict[str, str]:
        return {n: node for node, ns in self.nuggets.items() for n in ns}

    def all_nuggets(self) -> set[str]:
        return {n for ns in self.nuggets.values() for n in ns}

    def ancestors(self, node: str) -> list[str]:
        out = []
        p = self.parent[node]
        while p is not None:
            out.append(p)
            p = self.parent[p]
        return out

    def descendants(self, node: str) -> list[str]:
        children: dict[str, list[str]] = {}
        for v, p in self.parent.items():
            if p is not None:
                children.setdefault(p, []).append(v)
        out, stack = [], list(children.get(node, []))
        while stack:
            v = stack.pop()
            out.append(v)
            stack.extend(children.get(v, []))
        return out


@dataclass(frozen=True)
class NuggetOverlap:
    to: float
    supo: float
    subo: float


@dataclass(frozen=True)
class HierarchyScores:
    ho: float
    to: float
    supo: float
    subo: float
    weights: tuple[float, float, float]
    n_nuggets: int
    per_nugget: Mapping[str, NuggetOverlap]

    def as_dict(self, per_nugget: bool = False) -> dict[str, object]:
        d: dict[str, object] = {"ho": self.ho, "to": self.to, "supo": self.supo, "subo": self.subo,
                                "weights": {"a": self.weights[0], "b": self.weights[1], "c": self.weights[2]},
                                "n_nuggets": self.n_nuggets}
        if per_nugget:
            d["per_nugget"] = {n: {"to": o.to, "supo": o.supo, "subo": o.subo} for n, o in self.per_nugget.items()}
        return d


def _sets(h: Hierarchy) -> dict[str, tuple[frozenset[str], frozenset[str], frozenset[str]]]:
    """Per nugget: (SC, SupS, SubS)."""
    out = {}
    for node, ns in h.nuggets.items():
        sup = frozenset(n for a in h.ancestors(node) for n in h.nuggets.get(a, ()))
        sub = frozenset(n for d in h.descendants(node) for n in h.nuggets.get(d, ()))
        for n in ns:
            same = frozenset(ns) - {n}
            out[n] = (sup | sub | same, sup, sub)
    return out


def _ratio(x: frozenset[str], y: frozenset[str]) -> float:
    union = x | y
    return len(x & y) / len(union) if union else 1.0


def hierarchy_overlap(h1: Hierarchy, h2: Hierarchy, a: float = 0.8, b: float = 0.1, c: float = 0.1) -> HierarchyScores:
    """HO(H1, H2) and its parts, over the nuggets both hierarchies hold (they must hold the same ones)."""
    n1, n2 = h1.all_nuggets(), h2.all_nuggets()
    if n1 != n2:
        raise ValueError(f"the hierarchies hold different nuggets (only in the first: {sorted(n1 - n2)[:5]}; "
                         f"only in the second: {sorted(n2 - n1)[:5]})")
    if not n1:
        raise ValueError("the hierarchies hold no nugget")
    s1, s2 = _sets(h1), _sets(h2)
    per = {n: NuggetOverlap(to=_ratio(s1[n][0], s2[n][0]), supo=_ratio(s1[n][1], s2[n][1]), subo=_ratio(s1[n][2], s2[n][2]))
           for n in sorted(n1)}
    k = len(per)
    to = sum(o.to for o in per.values()) / k
    supo = sum(o.supo for o in per.values()) / k
    subo = sum(o.subo for o in per.values()) / k
    return HierarchyScores(ho=a * to + b * supo + c * subo, to=to, supo=supo, subo=subo, weights=(a, b, c),
                           n_nuggets=k, per_nugget=per)
