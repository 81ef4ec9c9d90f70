"""A ranking stage's scores with its source stage's evidence: empirical-Bayes shrinkage of the
comparisons' Bradley-Terry scores toward what the source stage's scores predict.

A ranking stage orders a shortlist its source stage (Likert ratings) already scored. Both are noisy
measurements of the same importance: a shortlist of ~30 items from ~50 orders of 5 leaves each item in
~8 orders, and the Likert means behind the shortlist rest on ~5 ratings each. Ranking by the comparisons
alone throws the ratings away. Here they are combined by the normal-normal model of small-area
estimation (Fay and Herriot 1979):

    y_i ~ N(theta_i, s_i^2)              the comparisons' score and its standard error (`fit_bradley_terry`)
    theta_i ~ N(a + b * x_i, tau^2 + b^2 v_i)   what the source stage's score x_i (standard error
                                                 sqrt(v_i)) predicts, give or take tau and x_i's own noise

with a, b and tau estimated from the stage's own items by maximising the marginal likelihood
y_i ~ N(a + b x_i, tau^2 + b^2 v_i + s_i^2). Each item's combined score is its posterior mean, the comparisons
weighted by 1/s_i^2 against the prediction by 1/tau^2; its uncertainty the posterior standard deviation.
The data decide how much the source counts: where the ratings predict the comparisons well, tau is small
and an item seen in few comparisons leans on its rating; where they predict them loosely, tau is large
and the comparisons dominate. A source score that falls with the comparisons (b < 0) is not believed:
b is held at 0. The source is used only where it demonstrably predicts the comparisons (a likelihood-ratio
test against the model without it, `EVIDENCE`); otherwise, or with fewer than `MIN_ITEMS` items that
have both scores, the comparisons' scores stand as they are.

Measured on `examples/hostile.yaml`'s Prolific campaign, seeds 4-12 with and without adversaries
(docs/hostile-crowd.md): Spearman with the simulated truth 0.888 / 0.897 (comparisons alone) -> about
0.93 for both, with half the spread between runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

MIN_ITEMS = 5  # a, b and tau from fewer items would be guesses
MIN_TAU = 1e-3  # the prior never becomes certain
FIXED_POINT_ROUNDS = 8
# the likelihood-ratio statistic of the model with the source against the one without, chi-square with one
# degree of freedom: 6.63 is p = 0.01, so an unrelated source is used about one time in a hundred (and
# then mostly with a small slope)
EVIDENCE = 6.63


@dataclass(frozen=True)
class Combined:
    """`scores` and `stderr` per item (every item of the comparisons; those without a source score keep
    their comparison score), and the fitted prior: `intercept` (a), `slope` (b), `tau`, `items_used`
    (items with both scores) and `combined` (False when nothing was combined, e.g. too few items)."""

    scores: dict[str, float]
    stderr: dict[str, float]
    intercept: float
    slope: float
    tau: float
    items_used: int
    combined: bool


def combine(comparison: Mapping[str, tuple[float, float]], source: Mapping[str, tuple[float, float]]) -> Combined:
    """`comparison` maps item -> (score, standard error) from the comparisons; `source` item -> (score,
    standard error) from the source stage (a Likert mean: sd / sqrt(n)). Pure: the same inputs give the
    same output."""
    plain = Combined({k: v[0] for k, v in comparison.items()}, {k: v[1] for k, v in comparison.items()},
                     0.0, 0.0, math.inf, 0, False)
    both = sorted(k for k in comparison if k in source and _finite(source[k][0]) and _finite(source[k][1])
                  and _finite(comparison[k][0]) and _finite(comparison[k][1]) and comparison[k][1] > 0)
    if len(both) < MIN_ITEMS:
        return plain
    with np.errstate(all="ignore"):  # extreme inputs overflow quietly and are caught below
        got = _shrink(plain, both, comparison, source)
    if got.combined and not all(math.isfinite(q) for d in (got.scores, got.stderr) for q in d.values()):
        return Combined(plain.scores, plain.stderr, got.intercept, 0.0, got.tau, got.items_used, False)
    return got


def _shrink(plain: Combined, both: list[str], comparison: Mapping[str, tuple[float, float]],
            source: Mapping[str, tuple[float, float]]) -> Combined:
    """`combine` for the items with both scores (`both`, at least `MIN_ITEMS`)."""
    y = np.array([comparison[k][0] for k in both])
    s2 = np.array([comparison[k][1] for k in both]) ** 2
    x = np.array([float(source[k][0]) for k in both])
    v = np.array([float(source[k][1]) for k in both]) ** 2
    spread = float(np.var(y)) + float(np.max(s2))
    if not (math.isfinite(spread) and all(np.isfinite(q).all() for q in (y * y, s2, x * x, v, 1.0 / s2))):
        return plain  # values beyond floating point's range: the comparisons as they are
    if float(np.ptp(x)) == 0.0:  # every source score alike: it predicts nothing beyond the mean
        x = np.zeros_like(x)

    def fit(tau2: float, slope: bool = True) -> tuple[float, float, float]:
        """Weighted least squares of y on x at this tau^2 (the prior's variance is tau^2 plus the source
        score's own noise carried through the slope, b^2 v_i, so a fixed point in b), and the negative
        marginal log-likelihood; `slope=False` is the model without the source (b = 0)."""
        a, b = float(np.mean(y)), 0.0
        design = np.column_stack([np.ones_like(x), x])
        for _ in range(FIXED_POINT_ROUNDS if slope else 1):
            w = 1.0 / (tau2 + b * b * v + s2)
            wd = design * w[:, None]
            a, b = (float(c) for c in np.linalg.lstsq(design.T @ wd, wd.T @ y, rcond=None)[0])
            if b < 0 or not slope:  # a source that contradicts the comparisons is not used as a predictor
                b = 0.0
                a = float(np.sum(w * y) / np.sum(w))
        w = 1.0 / (tau2 + b * b * v + s2)
        r = y - a - b * x
        nll = 0.5 * float(np.sum(-np.log(w) + r * r * w))
        return a, b, nll

    def best(slope: bool) -> tuple[float, float]:
        """The tau^2 of largest marginal likelihood, and that likelihood (negative log)."""
        got = minimize_scalar(lambda t: fit(t, slope)[2], bounds=(MIN_TAU ** 2, max(spread, 4 * MIN_TAU ** 2)),
                              method="bounded", options={"xatol": 1e-6})
        return float(got.x), float(got.fun)

    tau2, nll = best(slope=True)
    _, nll0 = best(slope=False)
    a, b, _ = fit(tau2)
    if not all(math.isfinite(q) for q in (a, b, tau2, nll, nll0)):
        return plain
    if b <= 0 or 2.0 * (nll0 - nll) < EVIDENCE:
        # the source does not demonstrably predict the comparisons: they stand alone, unshrunk (shrinking
        # toward a common mean would reorder items by their standard errors alone)
        return Combined(plain.scores, plain.stderr, a, 0.0, math.sqrt(tau2), len(both), False)
    scores = dict(plain.scores)
    stderr = dict(plain.stderr)
    for k, yi, si2, xi, vi in zip(both, y, s2, x, v):
        prior = tau2 + b * b * vi
        precision = 1.0 / si2 + 1.0 / prior
        scores[k] = float((yi / si2 + (a + b * xi) / prior) / precision)
        stderr[k] = float(math.sqrt(1.0 / precision))
    return Combined(scores, stderr, a, b, math.sqrt(tau2), len(both), True)


def _finite(v: object) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(float(v))
