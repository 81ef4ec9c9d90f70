"""Comparing a sentence clustering with a gold one (seed 003, Geiss 2009, §5; Rosenberg & Hirschberg 2007).

The seed's formulas lose their minus signs and fraction bars in the PDF text; the reading used here:

- n_ij items shared by class c_i (gold) and cluster l_j (prediction), n_i and n_j the class and cluster
  sizes, N the number of items. Entropies are in nats: H(C) = -Σ_i n_i/N log(n_i/N),
  H(C|L) = -Σ_ij n_ij/N log(n_ij/n_j), and H(L), H(L|C) alike (eq. 2, where the leading minus is lost).
- Homogeneity h = 1 - H(C|L)/H(C), completeness c = 1 - H(L|C)/H(L) (eq. 2); when H(C) (resp. H(L)) is 0
  the clustering cannot be inhomogeneous (incomplete) and the score is 1, as in Rosenberg & Hirschberg.
- V_β = (1 + β) h c / (β h + c) (eq. 1; 0 when h = c = 0). β > 1 favours completeness, as the seed's
  prose says; the V-measure is β = 1, and Vlachos et al.'s V_beta sets β = |L| / |C|.
- I = H(C) + H(L) - H(C, L) (eq. 3, minus lost) and NMI = 2 I / (H(L) + H(C)) (eq. 4), which the seed
  shows equals V_1 (eqs. 5-6); both entropies 0 (one class, one cluster) gives 1.
- VI = H(C|L) + H(L|C) (eq. 7, Meila 2007), 0 for identical clusterings; NVI = VI / log N (eq. 8,
  the fraction bar lost), in [0, 1], with VI(L_single, C_one) = log N the maximum.
- Rand index = (TP + TN) / (N choose 2) over item pairs (eq. 9); adjusted Rand (Hubert & Arabie 1985)
  = (Σ_ij C(n_ij,2) - E) / ((Σ_i C(n_i,2) + Σ_j C(n_j,2))/2 - E) with E = Σ_i C(n_i,2) Σ_j C(n_j,2) / C(N,2),
  1 when the denominator is 0 (both partitions trivial in the same way).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import asdict, dataclass
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class ClusterScores:
    n_items: int
    n_classes: int
    n_clusters: int
    homogeneity: float
    completeness: float
    v_measure: float
    beta: float  # the β of v_beta
    v_beta: float
    nmi: float
    mutual_information: float
    vi: float
    nvi: float
    rand: float
    adjusted_rand: float

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def _entropy(sizes: Mapping[Hashable, int], n: int) -> float:
    return -sum(k / n * math.log(k / n) for k in sizes.values() if k)


def _conditional(joint: Mapping[tuple[Hashable, Hashable], int], given: Mapping[Hashable, int], n: int,
                 side: int) -> float:
    """H(X | Y) where `side` picks Y's position in the joint key."""
    return -sum(k / n * math.log(k / given[key[side]]) for key, k in joint.items() if k)


def v_beta(h: float, c: float, beta: float) -> float:
    if beta < 0:
        raise ValueError("beta must be >= 0")
    den = beta * h + c
    return (1 + beta) * h * c / den if den > 0 else 0.0


def _pairs(k: int) -> int:
    return k * (k - 1) // 2


def compare(gold: Mapping[K, Hashable], pred: Mapping[K, Hashable], beta: float | None = None) -> ClusterScores:
    """Every measure of seed 003 for `pred` (item -> cluster) against `gold` (item -> class).

    Both must label the same items: an item missing on one side has no place in the contingency table.
    `beta` is the β of `v_beta`; by default Vlachos et al.'s |L| / |C|.
    """
    if set(gold) != set(pred):
        only_gold = sorted(map(str, set(gold) - set(pred)))[:5]
        only_pred = sorted(map(str, set(pred) - set(gold)))[:5]
        raise ValueError(f"gold and prediction label different items (only in gold: {only_gold}; only in prediction: {only_pred})")
    n = len(gold)
    if n == 0:
        raise ValueError("no items to compare")
    joint = Counter((gold[x], pred[x]) for x in gold)
    classes = Counter(gold.values())
    clusters = Counter(pred.values())
    h_c, h_l = _entropy(classes, n), _entropy(clusters, n)
    h_c_given_l = _conditional(joint, clusters, n, 1)
    h_l_given_c = _conditional(joint, classes, n, 0)
    h = 1.0 if h_c == 0 else 1.0 - h_c_given_l / h_c
    c = 1.0 if h_l == 0 else 1.0 - h_l_given_c / h_l
    mi = max(0.0, h_c - h_c_given_l)  # = H(C) + H(L) - H(C, L)
    nmi = 1.0 if h_c == h_l == 0 else (2 * mi / (h_c + h_l) if h_c + h_l > 0 else 0.0)
    vi = h_c_given_l + h_l_given_c
    b = len(clusters) / len(classes) if beta is None else beta

    total = _pairs(n)
    same_both = sum(_pairs(k) for k in joint.values())
    same_class = sum(_pairs(k) for k in classes.values())
    same_cluster = sum(_pairs(k) for k in clusters.values())
    tp = same_both
    fp = same_cluster - tp
    fn = same_class - tp
    tn = total - tp - fp - fn
    rand = 1.0 if total == 0 else (tp + tn) / total
    expected = same_class * same_cluster / total if total else 0.0
    top = (same_class + same_cluster) / 2
    ari = 1.0 if top == expected else (same_both - expected) / (top - expected)
    return ClusterScores(n_items=n, n_classes=len(classes), n_clusters=len(clusters), homogeneity=h, completeness=c,
                         v_measure=v_beta(h, c, 1.0), beta=b, v_beta=v_beta(h, c, b), nmi=nmi, mutual_information=mi,
                         vi=vi, nvi=vi / math.log(n) if n > 1 else 0.0, rand=rand, adjusted_rand=ari)
