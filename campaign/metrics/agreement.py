"""Agreement between annotators: percentage agreement and Fleiss' kappa over categorical labels, and
Krippendorff's unitized alpha (alpha_U) over spans on a continuum.

alpha_U (Krippendorff 1995; Content Analysis, 2004, ch. 12) judges *where* annotators put units, not
only which tokens they marked: two overlapping units that disagree at the edges cost the squared
differences of their beginnings and ends; a unit that lies inside another annotator's gap costs its
squared length. Expected disagreement considers every way the same units and gaps could be laid out.
Each category is scored on its own, and the overall figure is 1 - mean(D_o) / mean(D_e).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np

# ------------------------------------------------------------------------------ categorical agreement


def fleiss(counts: np.ndarray) -> tuple[float, float]:
    """(percentage agreement P-bar, Fleiss' kappa) from an items x categories matrix of rater counts.

    Every item must have the same number of raters (at least 2).
    """
    counts = np.asarray(counts, dtype=float)
    n = counts.sum(axis=1)
    if counts.ndim != 2 or len(counts) == 0:
        raise ValueError("counts must be a non-empty items x categories matrix")
    if not np.allclose(n, n[0]) or n[0] < 2:
        raise ValueError("every item needs the same number of raters, at least 2")
    r = n[0]
    p_item = (np.sum(counts * (counts - 1), axis=1)) / (r * (r - 1))
    p_bar = float(p_item.mean())
    p_cat = counts.sum(axis=0) / counts.sum()
    p_e = float(np.sum(p_cat ** 2))
    kappa = (p_bar - p_e) / (1 - p_e) if p_e < 1 else 1.0
    return p_bar, float(kappa)


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
