"""Agreement between annotators: percentage agreement, Fleiss' kappa and nominal Krippendorff's alpha over
categorical labels (`categorical_agreement` gives all three), and Krippendorff's unitized alpha
(alpha_U) over spans on a continuum.

alpha_U (Krippendorff 1995; Content Analysis, 2004, ch. 12) judges *where* annotators put units, not
only which tokens they marked: two overlapping units that disagree at the edges cost the squared
differences of their beginnings and ends; a unit that lies inside another annotator's gap costs its
squared length. Expected disagreement considers every way the same units and gaps could be laid out.
Each category is scored on its own, and the overall figure is 1 - mean(D_o) / mean(D_e).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence

import numpy as np

# ------------------------------------------------------------------------------ categorical agreement


def fleiss(counts: np.ndarray) -> tuple[float, float]:
    """(percentage agreement P-bar, Fleiss' kappa) from an items x categories matrix of rater counts.

    Items may have different numbers of raters, as every real campaign's do (returns, rejections,
    exclusions): each item's agreement is taken over its own n_i (n_i - 1) rater pairs, items with
    fewer than two raters are left out, and chance agreement comes from the pooled category shares.
    With equal numbers of raters this is Fleiss (1971) exactly. Krippendorff's alpha
    (`nominal_alpha`) is the better-founded figure for missing ratings; report it beside kappa.
    """
    counts = np.asarray(counts, dtype=float)
    if counts.ndim != 2 or len(counts) == 0:
        raise ValueError("counts must be a non-empty items x categories matrix")
    n = counts.sum(axis=1)
    rated = n >= 2
    if not rated.any():
        raise ValueError("no item has two or more raters: agreement is undefined")
    counts, n = counts[rated], n[rated]
    p_item = np.sum(counts * (counts - 1), axis=1) / (n * (n - 1))
    p_bar = float(p_item.mean())
    p_cat = counts.sum(axis=0) / counts.sum()
    p_e = float(np.sum(p_cat ** 2))
    kappa = (p_bar - p_e) / (1 - p_e) if p_e < 1 else 1.0
    return p_bar, float(kappa)


def nominal_alpha(labels: Mapping[Hashable, Sequence[Hashable]] | Iterable[tuple[Hashable, Hashable, Hashable]]) -> float:
    """Krippendorff's alpha for nominal data, with any number of missing values.

    `labels`: {unit: [values given to it]} (missing ratings simply absent), or (unit, coder, value)
    triples. Built on the coincidence matrix (Krippendorff, Content Analysis, 2004, ch. 11): each unit
    with m >= 2 values adds 1/(m - 1) for every ordered pair of its values from different coders, so
    units with one value count for nothing and every unit's pairs weigh the same in total.
    alpha = 1 - (n - 1) * sum_{c != k} o_ck / sum_{c != k} n_c n_k. NaN when fewer than two values
    are pairable or only one category occurs (no variation: alpha undefined).
    """
    per_unit = _values_per_unit(labels)
    cats = sorted({v for vals in per_unit for v in vals}, key=repr)
    index = {c: k for k, c in enumerate(cats)}
    o = np.zeros((len(cats), len(cats)))
    for vals in per_unit:
        m = len(vals)
        if m < 2:
            continue
        counts = np.bincount([index[v] for v in vals], minlength=len(cats)).astype(float)
        o += (np.outer(counts, counts) - np.diag(counts)) / (m - 1)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    if n < 2:
        return float("nan")
    disagree_obs = o.sum() - np.trace(o)
    disagree_exp = n * n - float(np.sum(n_c ** 2))
    if disagree_exp <= 0:
        return float("nan")
    return float(1.0 - (n - 1) * disagree_obs / disagree_exp)


def _values_per_unit(labels: Mapping[Hashable, Sequence[Hashable]] | Iterable[tuple[Hashable, Hashable, Hashable]]) -> list[list[Hashable]]:
    if isinstance(labels, Mapping):
        return [[v for v in vals if v is not None and not (isinstance(v, float) and v != v)] for vals in labels.values()]
    by_unit: dict[Hashable, list[Hashable]] = {}
    for unit, _, value in labels:
        if value is None or (isinstance(value, float) and value != value):
            continue
        by_unit.setdefault(unit, []).append(value)
    return list(by_unit.values())


def categorical_agreement(labels: Iterable[tuple[Hashable, Hashable, Hashable]]) -> dict[str, float | int | None]:
    """Agreement figures to show side by side, from (item, worker, label) triples: percentage agreement,
    Fleiss' kappa (generalised to unequal rater counts) and nominal Krippendorff's alpha.

    The one call for the dashboard and the report: kappa alone is misleading on real campaigns, where
    items end up with different numbers of raters; alpha is built for that. Values are None where a
    figure is undefined (fewer than two raters on every item, or a single category)."""
    triples = [t for t in labels if t[2] is not None]
    per_unit = _values_per_unit(triples)
    cats = sorted({v for vals in per_unit for v in vals}, key=repr)
    index = {c: k for k, c in enumerate(cats)}
    counts = np.array([np.bincount([index[v] for v in vals], minlength=len(cats)) for vals in per_unit], dtype=float) \
        if per_unit and cats else np.zeros((0, 0))
    raters = counts.sum(axis=1) if len(counts) else np.zeros(0)
    out: dict[str, float | int | None] = {"items": int(len(per_unit)), "items_with_two_or_more": int(np.sum(raters >= 2)),
                                          "labels": len(triples), "categories": len(cats),
                                          "percent_agreement": None, "fleiss_kappa": None, "krippendorff_alpha": None}
    if out["items_with_two_or_more"]:
        p_bar, kappa = fleiss(counts)
        out["percent_agreement"] = round(p_bar, 4)
        out["fleiss_kappa"] = round(kappa, 4) if len(cats) > 1 else None
        alpha = nominal_alpha(triples)
        out["krippendorff_alpha"] = None if alpha != alpha else round(alpha, 4)
    return out


def binary_token_counts(marked: np.ndarray, raters: int) -> np.ndarray:
    """Counts matrix for token-level binary labels: `marked[t]` raters marked token t; the rest (up to
    `raters`, absent raters included) count as "not marked", as the seed-002 agreement figures do."""
    marked = np.asarray(marked, dtype=float)
    if np.any(marked > raters):
        raise ValueError("more raters marked a token than there are raters")
    return np.stack([raters - marked, marked], axis=1)


# ------------------------------------------------------------------------------ unitized alpha


def _segments(units: Sequence[tuple[int, int]], begin: int, end: int) -> list[tuple[int, int, bool]]:
    """A coder's continuum as (begin, end, is_unit) segments: their units and the gaps between them."""
    out = []
    pos = begin
    for b, length in sorted(units):
        if b < pos:
            raise ValueError(f"units of one coder and category overlap at {b}")
        if b > pos:
            out.append((pos, b, False))
        out.append((b, b + length, True))
        pos = b + length
    if pos < end:
        out.append((pos, end, False))
    return out


def _distance(g: tuple[int, int, bool], h: tuple[int, int, bool]) -> float:
    (bg, eg, ug), (bh, eh, uh) = g, h
    if ug and uh:
        return float((bg - bh) ** 2 + (eg - eh) ** 2) if bg < eh and bh < eg else 0.0
    if ug and not uh:
        return float((eg - bg) ** 2) if bh <= bg and eg <= eh else 0.0
    if uh and not ug:
        return float((eh - bh) ** 2) if bg <= bh and eh <= eg else 0.0
    return 0.0


def _observed(per_coder: list[list[tuple[int, int, bool]]], length: int) -> float:
    m = len(per_coder)
    total = 0.0
    for a in range(m):
        for b in range(a + 1, m):
            s1, s2 = per_coder[a], per_coder[b]
            i = j = 0
            while i < len(s1) and j < len(s2):  # each overlapping pair of segments meets once
                total += _distance(s1[i], s2[j])
                if s1[i][1] <= s2[j][1]:
                    i += 1
                else:
                    j += 1
    return 2.0 * total / (m * (m - 1) * float(length) ** 2)


def _expected(per_coder: list[list[tuple[int, int, bool]]], length: int) -> float:
    m = len(per_coder)
    units = np.array([e - b for segs in per_coder for b, e, u in segs if u], dtype=float)
    gaps = np.sort(np.array([e - b for segs in per_coder for b, e, u in segs if not u], dtype=float))
    if len(units) == 0:
        return 0.0
    n_c = len(units)
    suffix = np.concatenate([np.cumsum(gaps[::-1])[::-1], [0.0]])  # sum of gaps from index k on
    k = np.searchsorted(gaps, units, side="left")  # first gap >= unit length
    count = len(gaps) - k
    gap_term = units ** 2 * (suffix[k] - count * (units - 1))
    own = (n_c - 1) * (2 * units ** 3 - 3 * units ** 2 + units) / 3.0
    numerator = (2.0 / length) * float(np.sum(own + gap_term))
    denominator = m * length * (m * length - 1) - float(np.sum(units * (units - 1)))
    return numerator / denominator


def alpha_u(units: Sequence[tuple[Hashable, int, int, str]], coders: Sequence[Hashable], begin: int,
            length: int) -> tuple[float, dict[str, float]]:
    """Krippendorff's alpha_U over (coder, begin, length, category) units on [begin, begin + length).

    Returns the overall alpha and alpha per category. A coder with no unit still counts (all gap).
    """
    categories = sorted({u[3] for u in units})
    if not categories:
        raise ValueError("no units: alpha_U is undefined")
    per_cat: dict[str, float] = {}
    d_o, d_e = [], []
    for c in categories:
        per_coder = [_segments([(u[1], u[2]) for u in units if u[0] == coder and u[3] == c], begin, begin + length)
                     for coder in coders]
        o, e = _observed(per_coder, length), _expected(per_coder, length)
        d_o.append(o)
        d_e.append(e)
        per_cat[c] = 1.0 - o / e if e > 0 else (1.0 if o == 0 else 0.0)
    mo, me = float(np.mean(d_o)), float(np.mean(d_e))
    return (1.0 - mo / me if me > 0 else 1.0), per_cat


def observed_expected(units: Sequence[tuple[Hashable, int, int, str]], coders: Sequence[Hashable], begin: int,
                      length: int, category: str) -> tuple[float, float]:
    """D_o and D_e of one category (for sums over many continua, e.g. one per HIT)."""
    per_coder = [_segments([(u[1], u[2]) for u in units if u[0] == coder and u[3] == category], begin, begin + length)
                 for coder in coders]
    return _observed(per_coder, length), _expected(per_coder, length)


def percentage_agreement(labels: Mapping[Hashable, Sequence[Hashable]]) -> float:
    """Mean over items of the share of agreeing rater pairs (items with at least two labels)."""
    shares = []
    for vals in labels.values():
        n = len(vals)
        if n < 2:
            continue
        _, counts = np.unique(np.asarray([str(v) for v in vals]), return_counts=True)
        shares.append(float(np.sum(counts * (counts - 1)) / (n * (n - 1))))
    return float(np.mean(shares)) if shares else float("nan")
