"""The default aggregator for categorical labels (`auto`): majority vote unless the data itself shows a
model is better, judged without gold.

MACE and Dawid-Skene beat majority vote when annotators differ and each item has enough labels, and fall
below it when the model is not identified by the data: few labels per item, a rare class (MACE predicted
21-29% positives on a set with 12%), or annotators whose errors are correlated. So a model is chosen only
when three kinds of evidence available without gold agree:

* **held-back labels**: one label of every item with at least three is held back (seeded), every method
  is fitted on the rest, and the held-back labels are scored by the probability the fit gives them
  (majority vote as the one-coin model). A model has to predict unseen labels better than majority vote
  by `margin` nats per label; an over-fitted model does not.
* **stable restarts**: the two restarts with the best likelihood must agree on at least
  `min_restart_agreement` of the items; when they do not, the likelihood surface has several peaks
  and the winner is a coin toss.
* **class balance**: the predicted share of every class must stay within `max_balance_shift` (total
  variation distance) of majority vote's; a model that invents a class's frequency is not trusted.

Among the models that pass, the best held-back score wins; if none passes, majority vote.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from campaign.aggregate.dawid_skene import DawidSkene
from campaign.aggregate.mace import MACE
from campaign.aggregate.majority import MajorityVote

METHODS = ("auto", "majority", "mace", "ds")
Triple = tuple[Hashable, Hashable, Hashable]


def make(method: str, seed: int = 0) -> Any:
    """A fresh aggregator by name (not `auto`)."""
    if method == "majority":
        return MajorityVote()
    if method == "mace":
        return MACE(seed=seed)
    if method == "ds":
        return DawidSkene(seed=seed)
    raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")


def holdout_split(triples: list[Triple], seed: int) -> tuple[list[Triple], list[Triple]]:
    """One random label held back from every item with at least three labels."""
    rng = np.random.default_rng([seed, 16])
    by_item: dict[Hashable, list[int]] = {}
    for k, t in enumerate(triples):
        by_item.setdefault(t[0], []).append(k)
    held = {idx[int(rng.integers(len(idx)))] for idx in by_item.values() if len(idx) >= 3}
    return [t for k, t in enumerate(triples) if k not in held], [t for k, t in enumerate(triples) if k in held]


def heldout_score(method: str, train: list[Triple], test: list[Triple], seed: int) -> float:
    """Mean log-probability of the held-back labels under `method` fitted on the rest."""
    model = make(method, seed).fit(train)
    if method == "majority":
        p = np.asarray(model.label_probability([t[0] for t in test], [t[2] for t in test]))
    else:
        ii = {it: k for k, it in enumerate(model.items_)}
        li = {lab: k for k, lab in enumerate(model.labels_)}
        keep = [t for t in test if t[2] in li and t[0] in ii]  # a label value never seen in training scores as unknown
        p = model.label_probability(np.array([ii[t[0]] for t in keep], dtype=np.int64), [t[1] for t in keep],
                                    np.array([li[t[2]] for t in keep], dtype=np.int64))
        p = np.concatenate([p, np.full(len(test) - len(keep), 1e-6)])
    return float(np.mean(np.log(np.clip(p, 1e-12, 1.0))))


def class_shares(pred: dict, labels: list) -> np.ndarray:
    values = list(pred.values())
    return np.array([sum(1 for v in values if v == lab) / max(len(values), 1) for lab in labels])


def restart_agreement(restarts: list[tuple[float, np.ndarray]]) -> float:
    """Share of items on which the two restarts with the best log-likelihood predict the same label."""
    if len(restarts) < 2:
        return 1.0
    a, b = sorted(restarts, key=lambda r: -r[0])[:2]
    return float(np.mean(a[1] == b[1]))


@dataclass
class AutoAggregator:
    seed: int = 0
    margin: float = 0.005
    min_restart_agreement: float = 0.97
    max_balance_shift: float = 0.05
    candidates: tuple[str, ...] = ("ds", "mace")

    method_: str = field(default="majority", init=False)
    evidence_: dict = field(default_factory=dict, init=False)
    reason_: str = field(default="", init=False)
    model_: Any = field(default=None, init=False)
    models_: dict = field(default_factory=dict, init=False)  # every fitted aggregator, by name

    def fit(self, labels: Iterable[Triple]) -> AutoAggregator:
        triples = list(labels)
        train, test = holdout_split(triples, self.seed)
        majority = MajorityVote().fit(triples)
        mv_shares = class_shares(majority.predict(), majority.labels_)
        base = heldout_score("majority", train, test, self.seed) if test else float("nan")
        self.evidence_ = {"majority": {"heldout_log_prob": round(base, 5), "held_back_labels": len(test)}}
        fitted: dict[str, Any] = {"majority": majority}
        passing: list[tuple[float, str]] = []
        for name in self.candidates:
            model = make(name, self.seed).fit(triples)
            fitted[name] = model
            score = heldout_score(name, train, test, self.seed) if test else float("nan")
            agree = restart_agreement(model.restarts_)
            shift = 0.5 * float(np.abs(class_shares(model.predict(), majority.labels_) - mv_shares).sum())
            checks = {"predicts_held_back_labels_better": bool(test) and score >= base + self.margin,
                      "restarts_agree": agree >= self.min_restart_agreement,
                      "class_balance_kept": shift <= self.max_balance_shift}
            self.evidence_[name] = {"heldout_log_prob": round(score, 5), "restart_agreement": round(agree, 4),
                                    "class_balance_shift": round(shift, 4), **checks}
            if all(checks.values()):
                passing.append((score, name))
        if passing:
            self.method_ = max(passing)[1]
            self.reason_ = (f"{self.method_} predicts held-back labels better than majority vote "
                            f"({self.evidence_[self.method_]['heldout_log_prob']:.4f} vs {base:.4f} nats per label), "
                            f"its best restarts agree and it keeps majority vote's class balance")
        else:
            self.method_ = "majority"
            failed = {n: [k for k, v in self.evidence_[n].items() if v is False] for n in self.candidates}
            self.reason_ = "no model passed every check (" + "; ".join(f"{n}: {', '.join(f) or 'ok'}" for n, f in failed.items()) + ")"
        self.model_ = fitted[self.method_]
        self.models_ = fitted
        return self

    def predict(self) -> dict:
        if self.model_ is None:
            raise RuntimeError("call fit() first")
        return dict(self.model_.predict())

    @property
    def competence_(self) -> dict:
        return dict(self.model_.competence_) if self.model_ is not None else {}


def aggregate(labels: Iterable[Triple], method: str = "auto", seed: int = 0) -> tuple[dict, dict, str, dict]:
    """(item labels, worker competences, method used, evidence) for any (item, worker, label) triples."""
    triples = list(labels)
    if method == "auto":
        auto = AutoAggregator(seed=seed).fit(triples)
        return auto.predict(), auto.competence_, auto.method_, {"reason": auto.reason_, **auto.evidence_}
    model = make(method, seed).fit(triples)
    return dict(model.predict()), dict(model.competence_), method, {}
