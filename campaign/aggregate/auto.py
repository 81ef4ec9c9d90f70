"""The default aggregator for categorical labels (`auto`): the method that predicts unseen labels best,
judged without gold, with majority vote as the default a model has to beat with confidence.

MACE and Dawid-Skene beat majority vote when annotators differ and each item has enough labels (most
of all where the majority is systematically wrong: many annotators sharing one bias, a confusable pair
of classes, a few good annotators among many poor ones), and fall below it when the data do not
identify the model: few labels per item, a rare class, annotators whose errors are correlated. The
evidence that tells these apart without gold is how well each method predicts labels it did not see:

* **cross-validated held-back labels**: in each of `folds` folds one label of every item with at least
  three labels is held back (a different label per fold, seeded), every method is fitted on the rest and
  the held-back labels are scored by the probability the fit gives them (majority vote as the one-coin
  model). A model is chosen when its gain over majority vote, in nats per held-back label, stays above
  zero by `z` standard errors (clustered by item, since one item's folds share labels). Its share of
  the classes may differ from majority vote's: where the majority is systematically wrong, the
  correction is exactly such a shift, so disagreement with majority vote is no evidence against a model.
* **stable restarts**: the two restarts with the best likelihood must agree on at least
  `min_restart_agreement` of the items, or disagree on fewer than half the items on which the model
  changes majority vote's label. Otherwise the likelihood has several peaks of nearly the same height,
  and which of them wins decides as many labels as the model corrects: the correction is a coin toss.
  (A biased crowd can leave two peaks 1 nat apart that differ on 5% of the items while both correct
  20% of majority vote's labels: that disagreement does not show the correction wrong.)

Among the models that pass, Dawid-Skene (a full confusion matrix per annotator, which nests MACE's
"knows, else answers from a strategy") is taken unless MACE predicts the held-back labels better than
it by `z` standard errors (paired, label by label): the richer model where the data support both, the
simpler one where the data say it is better. If none passes, majority vote. Every
figure behind the choice is kept in `evidence_` (None, with a reason, where nothing could be held back).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from campaign.aggregate.dawid_skene import DawidSkene
from campaign.aggregate.mace import MACE
from campaign.aggregate.majority import MajorityVote

METHODS = ("auto", "majority", "mace", "ds")
Triple = tuple[Hashable, Hashable, Hashable]
NO_HELD_BACK = "no item has three or more labels, so no label can be held back"


def make(method: str, seed: int = 0) -> Any:
    """A fresh aggregator by name (not `auto`)."""
    if method == "majority":
        return MajorityVote()
    if method == "mace":
        return MACE(seed=seed)
    if method == "ds":
        return DawidSkene(seed=seed)
    raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")


def cv_folds(triples: list[Triple], folds: int, seed: int) -> list[list[int]]:
    """Per fold, the indices of the held-back labels: one per item with at least three labels, a
    different one in each fold (an item with n labels is held back in its first min(n, folds) folds),
    so every training set keeps at least two labels of every item."""
    rng = np.random.default_rng([seed, 30])
    by_item: dict[Hashable, list[int]] = {}
    for k, t in enumerate(triples):
        by_item.setdefault(t[0], []).append(k)
    out: list[list[int]] = [[] for _ in range(folds)]
    for idx in by_item.values():
        if len(idx) < 3:
            continue
        order = rng.permutation(len(idx))
        for f in range(min(folds, len(idx))):
            out[f].append(idx[int(order[f])])
    return [sorted(f) for f in out if f]


def holdout_split(triples: list[Triple], seed: int) -> tuple[list[Triple], list[Triple]]:
    """One random label held back from every item with at least three labels (the first fold)."""
    folds = cv_folds(triples, 1, seed)
    held = set(folds[0]) if folds else set()
    return [t for k, t in enumerate(triples) if k not in held], [t for k, t in enumerate(triples) if k in held]


def heldout_log_probs(method: str, train: list[Triple], test: list[Triple], seed: int) -> np.ndarray:
    """Log-probability of each held-back label under `method` fitted on the rest."""
    model = make(method, seed).fit(train)
    if method == "majority":
        p = np.asarray(model.label_probability([t[0] for t in test], [t[2] for t in test]), dtype=float)
    else:
        ii = {it: k for k, it in enumerate(model.items_)}
        li = {lab: k for k, lab in enumerate(model.labels_)}
        known = np.array([t[2] in li and t[0] in ii for t in test], dtype=bool)
        keep = [t for t, ok in zip(test, known) if ok]
        p = np.full(len(test), 1e-6)  # a label value never seen in training scores as unknown
        if keep:
            p[known] = model.label_probability(np.array([ii[t[0]] for t in keep], dtype=np.int64), [t[1] for t in keep],
                                               np.array([li[t[2]] for t in keep], dtype=np.int64))
    return np.log(np.clip(p, 1e-12, 1.0))


def heldout_score(method: str, train: list[Triple], test: list[Triple], seed: int) -> float:
    """Mean log-probability of the held-back labels under `method` fitted on the rest."""
    return float(np.mean(heldout_log_probs(method, train, test, seed)))


def paired_gain(diff: np.ndarray, item: np.ndarray) -> tuple[float, float]:
    """Mean of per-label differences and its standard error, clustered by item (the labels one item
    gives to several folds are not independent evidence)."""
    n = len(diff)
    mean = float(diff.mean())
    _, inv = np.unique(item, return_inverse=True)
    resid = np.bincount(inv, weights=diff - mean)
    clusters = len(resid)
    if clusters < 2:
        return mean, math.inf
    return mean, float(math.sqrt(clusters / (clusters - 1) * float(np.sum(resid ** 2))) / n)


def class_shares(pred: dict, labels: list) -> np.ndarray:
    values = list(pred.values())
    return np.array([sum(1 for v in values if v == lab) / max(len(values), 1) for lab in labels])


def restart_agreement(restarts: list[tuple[float, np.ndarray]]) -> float:
    """Share of items on which the two restarts with the best log-likelihood predict the same label."""
    if len(restarts) < 2:
        return 1.0
    a, b = sorted(restarts, key=lambda r: -r[0])[:2]
    return float(np.mean(a[1] == b[1]))


def _r(x: float, digits: int = 5) -> float | None:
    return round(x, digits) if math.isfinite(x) else None


@dataclass
class AutoAggregator:
    seed: int = 0
    folds: int = 5
    z: float = 2.0  # a model must beat majority vote by this many standard errors of the held-out gain
    min_restart_agreement: float = 0.97
    candidates: tuple[str, ...] = ("ds", "mace")

    method_: str = field(default="majority", init=False)
    evidence_: dict = field(default_factory=dict, init=False)
    reason_: str = field(default="", init=False)
    model_: Any = field(default=None, init=False)
    models_: dict = field(default_factory=dict, init=False)  # every fitted aggregator, by name
    #: told (fits done, fits in all, what comes next) as the fits go: on 100,000 labels the choice takes
    #: about 40 s (5 folds x 3 methods, then each model on every label), and a command shows it
    progress: Callable[[int, int, str], None] | None = None

    def fit(self, labels: Iterable[Triple]) -> AutoAggregator:
        triples = list(labels)
        folds = cv_folds(triples, self.folds, self.seed)
        names = ("majority", *self.candidates)
        total, done = len(folds) * len(names) + len(self.candidates), 0
        tell = self.progress or (lambda done, total, doing: None)
        logp: dict[str, list[np.ndarray]] = {n: [] for n in names}
        held_items: list[Hashable] = []
        for f, held in enumerate(folds, start=1):
            hs = set(held)
            train = [t for k, t in enumerate(triples) if k not in hs]
            test = [triples[k] for k in held]
            held_items += [t[0] for t in test]
            for n in names:
                tell(done, total, f"held-back fold {f}/{len(folds)}: {n}")
                logp[n].append(heldout_log_probs(n, train, test, self.seed))
                done += 1
        lp = {n: np.concatenate(v) if v else np.zeros(0) for n, v in logp.items()}
        item_codes = np.array([repr(i) for i in held_items])
        n_held = len(held_items)
        base = float(lp["majority"].mean()) if n_held else math.nan
        majority = MajorityVote().fit(triples)
        mv_shares = class_shares(majority.predict(), majority.labels_)
        self.evidence_ = {"majority": {"heldout_log_prob": _r(base), "held_back_labels": n_held, "folds": len(folds)}}
        if not n_held:
            self.evidence_["majority"]["heldout_log_prob_null_because"] = NO_HELD_BACK
        fitted: dict[str, Any] = {"majority": majority}
        passing: list[tuple[float, str]] = []
        for name in self.candidates:
            tell(done, total, f"{name} on every label")
            model = make(name, self.seed).fit(triples)
            done += 1
            fitted[name] = model
            gain, se = paired_gain(lp[name] - lp["majority"], item_codes) if n_held else (math.nan, math.nan)
            agree = restart_agreement(model.restarts_)
            pred, mv_pred = model.predict(), majority.predict()
            changed = sum(pred[it] != mv_pred[it] for it in mv_pred) / max(len(mv_pred), 1)
            shift = 0.5 * float(np.abs(class_shares(pred, majority.labels_) - mv_shares).sum())
            checks = {"predicts_held_back_labels_better": bool(n_held) and gain - self.z * se > 0,
                      "restarts_agree": agree >= self.min_restart_agreement or 1.0 - agree < 0.5 * changed}
            ev: dict[str, Any] = {"heldout_log_prob": _r(float(lp[name].mean()) if n_held else math.nan),
                                  "gain_over_majority": _r(gain), "gain_se": _r(se), "restart_agreement": round(agree, 4),
                                  "changed_from_majority": round(changed, 4), "class_balance_shift": round(shift, 4), **checks}
            if not n_held:
                ev["null_because"] = NO_HELD_BACK
            self.evidence_[name] = ev
            if all(checks.values()):
                passing.append((gain, name))
        if passing:
            order = [n for n in self.candidates if n in {p[1] for p in passing}]  # richest first
            self.method_ = order[0]
            for other in order[1:]:
                gain, se = paired_gain(lp[other] - lp[self.method_], item_codes)
                self.evidence_[other][f"gain_over_{self.method_}"] = _r(gain)
                self.evidence_[other][f"gain_over_{self.method_}_se"] = _r(se)
                if gain - self.z * se > 0:
                    self.method_ = other
            e = self.evidence_[self.method_]
            self.reason_ = (f"{self.method_} predicts held-back labels better than majority vote over {len(folds)} folds "
                            f"(+{e['gain_over_majority']:.4f} ± {e['gain_se']:.4f} nats per label, {n_held} labels) "
                            f"and its best restarts agree ({e['restart_agreement']:.3f})")
        else:
            self.method_ = "majority"
            if not n_held:
                self.reason_ = f"majority vote: {NO_HELD_BACK}"
            else:
                failed = {n: [k for k, v in self.evidence_[n].items() if v is False] for n in self.candidates}
                self.reason_ = "no model passed every check (" + "; ".join(
                    f"{n}: {', '.join(f) or 'ok'}" for n, f in failed.items()) + ")"
        self.model_ = fitted[self.method_]
        self.models_ = fitted
        tell(done, total, "")
        return self

    def predict(self) -> dict:
        if self.model_ is None:
            raise RuntimeError("call fit() first")
        return dict(self.model_.predict())

    @property
    def competence_(self) -> dict:
        return dict(self.model_.competence_) if self.model_ is not None else {}


def aggregate(labels: Iterable[Triple], method: str = "auto", seed: int = 0,
              progress: Callable[[int, int, str], None] | None = None) -> tuple[dict, dict, str, dict]:
    """(item labels, worker competences, method used, evidence) for any (item, worker, label) triples;
    `progress` hears how the fits go (see `AutoAggregator.progress`)."""
    triples = list(labels)
    if method == "auto":
        auto = AutoAggregator(seed=seed, progress=progress).fit(triples)
        return auto.predict(), auto.competence_, auto.method_, {"reason": auto.reason_, **auto.evidence_}
    model = make(method, seed).fit(triples)
    return dict(model.predict()), dict(model.competence_), method, {}
