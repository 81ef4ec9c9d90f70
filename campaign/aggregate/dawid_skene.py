"""Dawid & Skene (1979): a full confusion matrix per annotator, fitted by EM, beside MACE and majority vote.

Where MACE gives each annotator one competence and one spamming strategy, Dawid-Skene gives them a
K x K matrix P(label | true class) and the classes a prior. That is what a rare class needs: an annotator
who says "positive" too often is a row of the matrix, not a reason to believe positives are common. On a
held-out product-matching set (12% positives, 3 labels each) MACE predicted 21-29% positives and fell
below majority vote, where Dawid-Skene stayed above it (issue 16).

Initialised from majority vote's vote shares (the usual start, and deterministic); `n_restarts - 1`
further starts mix those shares half and half with random posteriors, and the restart with the best
log-likelihood wins. Each restart's
log-likelihood and predictions are kept (`restarts_`) because agreement between the best restarts is
evidence of a well-identified fit (`campaign.aggregate.auto`).

Vectorised over label instances like `campaign.aggregate.mace`: an E-step is one bincount over
(item, class) and an M-step one over (worker, class, label). Same contract as crowd-kit's aggregators:
`fit(labels)`, `predict()`, `predict_proba()`, fitted values as attributes.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment

from campaign.aggregate.mace import _lse, dense_to_triples


@dataclass
class Encoded:
    """(item, worker, label) triples as index arrays, with the values they index."""

    items: list
    workers: list
    labels: list
    item: np.ndarray
    worker: np.ndarray
    label: np.ndarray

    @classmethod
    def of(cls, labels: Iterable[tuple[Hashable, Hashable, Hashable]] | np.ndarray) -> Encoded:
        triples = dense_to_triples(labels) if isinstance(labels, np.ndarray) else list(labels)
        if not triples:
            raise ValueError("at least one label is needed")
        items = sorted({t[0] for t in triples}, key=repr)
        workers = sorted({t[1] for t in triples}, key=repr)
        values = sorted({t[2] for t in triples}, key=repr)
        ii = {v: k for k, v in enumerate(items)}
        wi = {v: k for k, v in enumerate(workers)}
        li = {v: k for k, v in enumerate(values)}
        n = len(triples)
        return cls(items, workers, values,
                   np.fromiter((ii[t[0]] for t in triples), dtype=np.int64, count=n),
                   np.fromiter((wi[t[1]] for t in triples), dtype=np.int64, count=n),
                   np.fromiter((li[t[2]] for t in triples), dtype=np.int64, count=n))


def vote_shares(item: np.ndarray, label: np.ndarray, n_items: int, n_labels: int) -> np.ndarray:
    """I x K share of each item's votes per label (majority vote as a soft assignment)."""
    counts = np.bincount(item * n_labels + label, minlength=n_items * n_labels).reshape(n_items, n_labels).astype(float)
    return counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)


def _align(result: tuple[float, np.ndarray, np.ndarray, np.ndarray],
           votes: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """Name the fitted classes after the labels they agree with most under majority vote.

    Relabelling the classes (rows of every confusion matrix, the priors, the posterior columns) leaves
    the likelihood unchanged, so a random start can land on a swapped copy of the best fit, e.g. on
    Snow et al.'s TEMP every restart reached the same likelihood, one with the classes swapped (5.8%).
    """
    ll, priors, conf, post = result
    _, perm = linear_sum_assignment(-(votes.T @ post))  # perm[label] = fitted class named after it
    return ll, priors[perm], conf[:, perm, :], post[:, perm]


@dataclass
class DawidSkene:
    n_iter: int = 100
    n_restarts: int = 3
    tol: float = 1e-7  # stop when the log-likelihood per label improves by less than this
    smoothing: float = 0.01  # pseudo-count on every confusion cell and class, so no probability is exactly 0
    seed: int = 0

    items_: list = field(default_factory=list, init=False)
    workers_: list = field(default_factory=list, init=False)
    labels_: list = field(default_factory=list, init=False)
    priors_: np.ndarray | None = field(default=None, init=False)
    confusion_: np.ndarray | None = field(default=None, init=False)  # W x K x K: P(label | true class)
    posteriors_: np.ndarray | None = field(default=None, init=False)
    competence_: dict = field(default_factory=dict, init=False)  # P(annotator's label is right), prior-weighted
    log_likelihood_: float = field(default=float("-inf"), init=False)
    restarts_: list = field(default_factory=list, init=False)  # (log-likelihood, argmax per item) per restart
    counts_: np.ndarray | None = field(default=None, init=False)  # W x K x K expected counts behind `confusion_`

    def fit(self, labels: Iterable[tuple[Hashable, Hashable, Hashable]] | np.ndarray) -> DawidSkene:
        """`labels`: (item, worker, label) triples, or a dense items x workers matrix ("" / None / NaN missing)."""
        enc = Encoded.of(labels)
        self.items_, self.workers_, self.labels_ = enc.items, enc.workers, enc.labels
        n_items, n_labels = len(enc.items), len(enc.labels)
        votes = vote_shares(enc.item, enc.label, n_items, n_labels)
        starts = [votes]
        for r in range(1, self.n_restarts):  # half majority vote, half noise: a different start on the same hill, if there is one
            starts.append(0.5 * votes + 0.5 * np.random.default_rng([self.seed, r]).dirichlet(np.ones(n_labels), size=n_items))
        self.restarts_ = []
        best = None
        for post in starts:
            result = _align(self._run(enc, post), starts[0])
            self.restarts_.append((result[0], np.argmax(result[3], axis=1)))
            if best is None or result[0] > best[0] + 1e-9 * abs(best[0]):
                best = result
        assert best is not None
        ll, priors, conf, post = best
        self.log_likelihood_, self.priors_, self.confusion_, self.posteriors_ = float(ll), priors, conf, post
        self.counts_ = self._expected_counts(enc, post)
        diag = np.einsum("wkk->wk", conf)
        self.competence_ = {w: float(diag[k] @ priors) for k, w in enumerate(self.workers_)}
        return self

    @staticmethod
    def _expected_counts(enc: Encoded, post: np.ndarray) -> np.ndarray:
        """W x K x K: [w, t, l] = expected count of (worker w said l, truth t)."""
        n_workers, n_labels = len(enc.workers), len(enc.labels)
        idx = ((enc.worker[:, None] * n_labels + np.arange(n_labels)[None, :]) * n_labels + enc.label[:, None]).ravel()
        counts = np.bincount(idx, weights=post[enc.item].ravel(), minlength=n_workers * n_labels * n_labels)
        return counts.reshape(n_workers, n_labels, n_labels)

    def _m_step(self, enc: Encoded, post: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n_labels = len(enc.labels)
        priors = (post.sum(axis=0) + self.smoothing) / (len(post) + n_labels * self.smoothing)
        conf = self._expected_counts(enc, post) + self.smoothing
        conf /= conf.sum(axis=2, keepdims=True)
        return priors, conf

    @staticmethod
    def _log_joint(enc: Encoded, priors: np.ndarray, conf: np.ndarray, n_items: int) -> np.ndarray:
        """I x K: log P(true class t) + sum of log P(observed label | t) over the item's labels."""
        n_labels = len(priors)
        lc = np.log(conf[enc.worker, :, enc.label])  # N x K
        idx = (enc.item[:, None] * n_labels + np.arange(n_labels)[None, :]).ravel()
        per_item = np.bincount(idx, weights=lc.ravel(), minlength=n_items * n_labels).reshape(n_items, n_labels)
        return per_item + np.log(priors)[None, :]

    def _run(self, enc: Encoded, post: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        n_items = len(enc.items)
        ll_old = -np.inf
        ll = -np.inf
        priors, conf = self._m_step(enc, post)
        for _ in range(self.n_iter):
            joint = self._log_joint(enc, priors, conf, n_items)
            norm = _lse(joint)
            ll = float(norm.sum())
            post = np.exp(joint - norm)
            priors, conf = self._m_step(enc, post)
            if ll - ll_old < self.tol * len(enc.item):
                break
            ll_old = ll
        joint = self._log_joint(enc, priors, conf, n_items)
        norm = _lse(joint)
        return float(norm.sum()), priors, conf, np.exp(joint - norm)

    # -- results --------------------------------------------------------------------------------------
    def predict(self) -> dict:
        """Most likely label per item."""
        if self.posteriors_ is None:
            raise RuntimeError("call fit() first")
        best = np.argmax(self.posteriors_, axis=1)
        return {it: self.labels_[best[k]] for k, it in enumerate(self.items_)}

    def label_probability(self, item_index: np.ndarray, worker: list, label_index: np.ndarray,
                          predictive: float = 1.0) -> np.ndarray:
        """P(worker gives this label to this item), for scoring held-back labels: each confusion row is
        the posterior predictive under a Dirichlet(`predictive`) prior (expected counts + `predictive`
        per cell), not the near-maximum-likelihood row the fit uses. A worker with 15 items of a class
        and no error of one kind among them would otherwise give that error a probability near 0.0007,
        and one such held-back label would cost 7 nats: the score would measure the point estimate's
        overconfidence, not whether the model explains unseen labels (MACE's are scored under its own
        priors likewise). A worker the fit never saw gets the mean predictive confusion matrix."""
        if self.posteriors_ is None or self.counts_ is None:
            raise RuntimeError("call fit() first")
        pred = self.counts_ + predictive
        pred = pred / pred.sum(axis=2, keepdims=True)
        wi = {w: k for k, w in enumerate(self.workers_)}
        mean_conf = pred.mean(axis=0)
        conf = np.stack([pred[wi[w]] if w in wi else mean_conf for w in worker])  # N x K x K
        post = self.posteriors_[item_index]  # N x K
        return np.einsum("nk,nk->n", post, conf[np.arange(len(label_index)), :, label_index])

    def predict_proba(self) -> dict:
        """Posterior over labels per item, as {item: {label: probability}}."""
        if self.posteriors_ is None:
            raise RuntimeError("call fit() first")
        return {it: {lab: float(self.posteriors_[k, a]) for a, lab in enumerate(self.labels_)} for k, it in enumerate(self.items_)}
