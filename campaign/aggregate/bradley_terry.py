"""Batch Bradley–Terry refit over all comparisons: the scores a campaign exports.

Online TrueSkill depends on the order answers arrived in; a batch refit does not, so the same answers
always give the same scores (invariant 2 in DESIGN.md). We fit the MAP of

    P(i beats j) = sigmoid(theta_i - theta_j),    theta ~ N(0, prior_sd^2) independently,

by Newton's method. Plain maximum likelihood diverges for an item that never lost (or never won) and is
undefined for items never compared; the weak Gaussian prior keeps every score finite and centres the
scale at 0 (the likelihood gradient sums to zero, so the MAP has mean 0). The posterior curvature
(Fisher information of the likelihood plus the prior precision) gives a standard error per item
through the diagonal of its inverse: items seen in fewer comparisons get larger errors, which the
planner and the export can use.

Ties (e.g. UKPConvArg1's 'equal') enter as weights: half a win each way is the usual choice.
Everything is vectorised over distinct pairs; 1,052 items and ~20k comparisons fit in well under a second.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import linalg

DEFAULT_PRIOR_SD = 2.0


@dataclass(frozen=True)
class BTResult:
    """Scores (log-strengths, mean 0) and standard errors, aligned with `items`."""

    items: tuple[Hashable, ...]
    scores: np.ndarray
    se: np.ndarray
    iterations: int
    converged: bool
    log_posterior: float

    def score(self, item: Hashable) -> float:
        return float(self.scores[self._index()[item]])

    def stderr(self, item: Hashable) -> float:
        return float(self.se[self._index()[item]])

    def _index(self) -> dict[Hashable, int]:
        return {it: n for n, it in enumerate(self.items)}

    def ordered(self) -> list[Hashable]:
        """Items best first; equal scores keep the input order (stable sort), so output is deterministic."""
        return [self.items[i] for i in np.argsort(-self.scores, kind="stable")]

    def as_dict(self) -> dict[Hashable, tuple[float, float]]:
        return {it: (float(s), float(e)) for it, s, e in zip(self.items, self.scores, self.se)}


def win_matrix(
    items: Sequence[Hashable],
    comparisons: Iterable[tuple[Hashable, Hashable] | tuple[Hashable, Hashable, float]],
) -> np.ndarray:
    """W[i, j] = (weighted) number of times item i was judged above item j."""
    index = {it: n for n, it in enumerate(items)}
    rows: list[int] = []
    cols: list[int] = []
    weights: list[float] = []
    for c in comparisons:
        w_item, l_item = c[0], c[1]
        weight = float(c[2]) if len(c) > 2 else 1.0
        if w_item == l_item:
            raise ValueError(f"an item cannot beat itself: {w_item!r}")
        try:
            rows.append(index[w_item])
            cols.append(index[l_item])
        except KeyError as e:
            raise KeyError(f"comparison names unknown item {e.args[0]!r}") from None
        weights.append(weight)
    n = len(items)
    flat = np.bincount(np.asarray(rows, dtype=np.int64) * n + np.asarray(cols, dtype=np.int64),
                       weights=np.asarray(weights, dtype=float), minlength=n * n)
    return flat.reshape(n, n)


def fit_bradley_terry(
    items: Sequence[Hashable],
    comparisons: Iterable[tuple[Hashable, Hashable] | tuple[Hashable, Hashable, float]],
    prior_sd: float = DEFAULT_PRIOR_SD,
    tol: float = 1e-8,
    max_iter: int = 100,
) -> BTResult:
    """MAP Bradley–Terry scores and standard errors from (winner, loser[, weight]) comparisons."""
    items = tuple(items)
    if len(set(items)) != len(items):
        raise ValueError("items must be distinct")
    if prior_sd <= 0:
        raise ValueError("prior_sd must be positive (the prior is what keeps unbeaten items finite)")
    return fit_from_matrix(items, win_matrix(items, comparisons), prior_sd, tol, max_iter)


def fit_from_matrix(
    items: Sequence[Hashable],
    wins: np.ndarray,
    prior_sd: float = DEFAULT_PRIOR_SD,
    tol: float = 1e-8,
    max_iter: int = 100,
) -> BTResult:
    """The same fit from a win matrix (lets callers that already count wins skip the item lookup)."""
    items = tuple(items)
    n = len(items)
    wins = np.asarray(wins, dtype=float)
    if wins.shape != (n, n):
        raise ValueError(f"win matrix must be {n}x{n}, got {wins.shape}")
    prec = 1.0 / prior_sd**2
    iu, ju = np.triu_indices(n, k=1)
    w_ij = wins[iu, ju]
    w_ji = wins[ju, iu]
    keep = (w_ij + w_ji) > 0
    iu, ju, w_ij, w_ji = iu[keep], ju[keep], w_ij[keep], w_ji[keep]
    n_ij = w_ij + w_ji

    def log_post(theta: np.ndarray) -> float:
        d = theta[iu] - theta[ju]
        # log sigmoid(d) = -log1p(exp(-d)), computed stably with logaddexp
        return float(-(w_ij * np.logaddexp(0.0, -d)).sum() - (w_ji * np.logaddexp(0.0, d)).sum()
                     - 0.5 * prec * (theta @ theta))

    def grad_and_info(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d = theta[iu] - theta[ju]
        p = 0.5 * (1.0 + np.tanh(0.5 * d))  # sigmoid without overflow
        r = w_ij - n_ij * p  # observed minus expected wins of i over j
        g = np.bincount(iu, weights=r, minlength=n) - np.bincount(ju, weights=r, minlength=n) - prec * theta
        c = n_ij * p * (1.0 - p)
        info = np.zeros((n, n))
        info[iu, ju] = -c
        info[ju, iu] = -c
        info[np.arange(n), np.arange(n)] = np.bincount(iu, weights=c, minlength=n) + np.bincount(ju, weights=c, minlength=n) + prec
        return g, info

    theta = np.zeros(n)
    current = log_post(theta)
    converged = False
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - `it` is reported after the loop
        g, info = grad_and_info(theta)
        step = linalg.cho_solve(linalg.cho_factor(info, check_finite=False), g, check_finite=False)
        # Newton on a concave objective rarely needs damping, but halve the step if it ever overshoots.
        t = 1.0
        for _ in range(30):
            cand = theta + t * step
            value = log_post(cand)
            if value >= current - 1e-12:
                break
            t *= 0.5
        theta, current = cand, value
        if float(np.max(np.abs(t * step), initial=0.0)) < tol:
            converged = True
            break
    _, info = grad_and_info(theta)
    cov_diag = np.diag(linalg.cho_solve(linalg.cho_factor(info, check_finite=False), np.eye(n), check_finite=False))
    return BTResult(items=items, scores=theta, se=np.sqrt(cov_diag), iterations=it, converged=converged,
                    log_posterior=current)


def ranking_to_pairs(ranking: Sequence[Hashable]) -> list[tuple[Hashable, Hashable]]:
    """The n(n-1)/2 (winner, loser) pairs a best-first ranking implies (10 for a 5-item HIT)."""
    return [(ranking[a], ranking[b]) for a in range(len(ranking)) for b in range(a + 1, len(ranking))]
