"""TSC3 precision, coverage and weighted coverage of an extract (seed 001, Hirao et al., §3.1).

The seed's PDF text garbles every formula; this is the reading reconstructed from its prose and its
worked examples (Table 1: abstract sentence 1 <- {s1} or {s10, s11}; 2 <- {s3, s4, s5}; 3 <- {s20, s21,
s23} or {s1, s30, s50}):

- The gold lists, for each abstract sentence i, its alternative sets G_i1 .. G_im of source sentences;
  any one set, output completely, is enough to produce sentence i.
- V, the length a system must output, is the size of the smallest set of source sentences that contains
  at least one G_ij for every i (the constraint problem of §3.1.1; {s1, s3, s4, s5, s30, s50}, V = 6).
- Precision = A / V, with A the number of output sentences that occur in any G_ij (eq. 1; the seed's
  examples: 4/6 = 0.667 and 6/6 = 1). TSC3 makes every system output exactly V sentences, so A / V is
  A / |output|; we divide by |output| so that an output of another length cannot exceed 1, and report V.
- e(i) = max_j |G_ij ∩ output| / |G_ij| (eqs. 4-5: the share of the best-covered alternative set),
  Coverage = (1/n) Σ_i e(i) over the n abstract sentences (eq. 6). The seed's 0.553 and 0.780 are this
  with each e(i) rounded to two decimals first ((1 + .33 + .33)/3 and (1 + .67 + .67)/3); the exact
  values are 5/9 = 0.556 and 7/9 = 0.778.
- Weighted coverage = Σ_i w(r(i)) e(i) / (w(A) n(A) + w(B) n(B) + w(C) n(C)) (eq. 7), r(i) the rank
  A/B/C of abstract sentence i, n(r) the number of abstract sentences of rank r, so the denominator is
  Σ_i w(r(i)) and an output covering everything scores 1. Footnote 7 sets w = 1/rank: 1, 1/2, 1/3 (the
  example's arithmetic prints the last as 0.3; its result is unreadable beyond "0.6..", and 1/rank gives
  (1 + 1/2·1/3 + 1/3·1/3) / (1 + 1/2 + 1/3) = 23/33 = 0.697).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

DEFAULT_WEIGHTS: dict[str, float] = {"A": 1.0, "B": 1.0 / 2, "C": 1.0 / 3}


@dataclass(frozen=True)
class AbstractSentence:
    """One abstract sentence: its alternative source-sentence sets and its TSC3 rank (A is best)."""

    key: str
    rank: str
    sets: tuple[frozenset[str], ...]


@dataclass(frozen=True)
class ExtractScores:
    precision: float
    coverage: float
    weighted_coverage: float
    correct: int  # A: output sentences found in some set
    output_length: int  # distinct sentences output
    required_length: int  # V
    minimal_extract: tuple[str, ...]  # one smallest extract that produces the abstract
    per_sentence: tuple[tuple[str, float], ...]  # e(i) per abstract sentence, in gold order

    def as_dict(self) -> dict[str, object]:
        return {"precision": self.precision, "coverage": self.coverage, "weighted_coverage": self.weighted_coverage,
                "correct": self.correct, "output_length": self.output_length, "required_length": self.required_length,
                "minimal_extract": list(self.minimal_extract),
                "per_sentence": [{"sentence": k, "e": e} for k, e in self.per_sentence]}


def minimal_extract(gold: Sequence[AbstractSentence]) -> frozenset[str]:
    """A smallest set of source sentences containing one alternative set of every abstract sentence.

    The constraint problem of §3.1.1 is a set-cover variant (NP-hard in general, and a plain branch and
    bound already stalls on 60 random abstract sentences), so it is solved as a 0/1 integer program
    with scipy's HiGHS: x_s = 1 if source sentence s is extracted, y_ij = 1 if set G_ij is chosen;
    minimise Σ x_s subject to Σ_j y_ij >= 1 for every i and y_ij <= x_s for every s in G_ij.
    Sentences with a single set are forced and left out of the program.
    """
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, milp

    needs = [tuple(set(s.sets)) for s in gold if s.sets]
    forced = frozenset().union(*(sets[0] for sets in needs if len(sets) == 1))
    # a sentence some forced set or already-covered set produces needs nothing more
    open_needs = [sets for sets in needs if len(sets) > 1 and not any(g <= forced for g in sets)]
    if not open_needs:
        return forced
    free = sorted({x for sets in open_needs for g in sets for x in g} - forced)
    col = {x: k for k, x in enumerate(free)}
    set_cols: list[tuple[int, frozenset[str]]] = []
    for sets in open_needs:
        for g in sets:
            set_cols.append((len(set_cols) + len(free), g))
    n_vars = len(free) + len(set_cols)
    rows: list[tuple[dict[int, float], float, float]] = []
    k = len(free)
    for sets in open_needs:  # choose at least one set per abstract sentence
        rows.append(({k + j: 1.0 for j in range(len(sets))}, 1.0, np.inf))
        k += len(sets)
    for c, g in set_cols:  # a chosen set extracts all its (not yet forced) sentences
        for x in g - forced:
            rows.append(({c: 1.0, col[x]: -1.0}, -np.inf, 0.0))
    a = np.zeros((len(rows), n_vars))
    lo, hi = np.empty(len(rows)), np.empty(len(rows))
    for r, (coef, low, high) in enumerate(rows):
        for c, v in coef.items():
            a[r, c] = v
        lo[r], hi[r] = low, high
    cost = np.concatenate([np.ones(len(free)), np.zeros(len(set_cols))])
    res = milp(cost, constraints=LinearConstraint(a, lo, hi), integrality=np.ones(n_vars),
               bounds=Bounds(0, 1))
    if res.x is None:  # cannot happen: choosing every set is feasible
        raise RuntimeError(f"minimal extract: the solver failed ({res.message})")
    return forced | {x for x in free if res.x[col[x]] > 0.5}


def sentence_score(sets: Iterable[frozenset[str]], output: frozenset[str]) -> float:
    """e(i): the share of the best-covered alternative set (0 when the sentence has no set)."""
    return max((len(g & output) / len(g) for g in sets if g), default=0.0)


def score_extract(gold: Sequence[AbstractSentence], output: Iterable[str],
                  weights: Mapping[str, float] | None = None) -> ExtractScores:
    """Precision, coverage and weighted coverage of `output` (source sentence ids; repeats count once)."""
    w = dict(DEFAULT_WEIGHTS if weights is None else weights)
    if not gold:
        raise ValueError("the gold lists no abstract sentence")
    missing = sorted({s.rank for s in gold} - set(w))
    if missing:
        raise ValueError(f"no weight for rank(s) {', '.join(missing)}")
    out = frozenset(output)
    relevant = frozenset().union(*(g for s in gold for g in s.sets))
    correct = len(out & relevant)
    per = tuple((s.key, sentence_score(s.sets, out)) for s in gold)
    coverage = sum(e for _, e in per) / len(gold)
    denom = sum(w[s.rank] for s in gold)
    weighted = sum(w[s.rank] * e for s, (_, e) in zip(gold, per)) / denom if denom > 0 else 0.0
    minimal = minimal_extract(gold)
    return ExtractScores(precision=correct / len(out) if out else 0.0, coverage=coverage, weighted_coverage=weighted,
                         correct=correct, output_length=len(out), required_length=len(minimal),
                         minimal_extract=tuple(sorted(minimal, key=_natural)), per_sentence=per)


def _natural(key: str) -> tuple:
    """Sort s2 before s10, so printed extracts read like the seed's."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", key))
