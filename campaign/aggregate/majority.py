"""Majority vote: the baseline every crowd aggregator has to beat.

Ties are kept (all tied labels returned) rather than broken arbitrarily, so that accuracy can split a
tie evenly: a coin flip's expected score, and the convention behind the published baselines (Snow et
al. 2008 report RTE 0.897 this way).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any


def majority_vote(labels: Iterable[tuple[Hashable, Hashable, Hashable]]) -> dict[Hashable, list]:
    """Per item, the labels with the most votes (several when tied), from (item, worker, label) triples."""
    counts: dict[Hashable, dict[Hashable, int]] = {}
    for it, _, lab in labels:
        per_item = counts.setdefault(it, {})
        per_item[lab] = per_item.get(lab, 0) + 1
    out = {}
    for it, c in counts.items():
        top = max(c.values())
        out[it] = sorted((lab for lab, n in c.items() if n == top), key=repr)
    return out


def accuracy(pred: Mapping[Any, Any], gold: Mapping[Any, Any]) -> float:
    """Share of gold items predicted right, over the gold items that have a prediction.

    A prediction given as a list is a tie: if it holds the gold label among k labels it scores 1/k.
    """
    total = 0.0
    n = 0
    for it, g in gold.items():
        if it not in pred:
            continue
        p = pred[it]
        n += 1
        if isinstance(p, list):
            total += (1.0 / len(p)) if g in p else 0.0
        else:
            total += float(p == g)
    return total / n if n else 0.0


class MajorityVote:
    """Majority vote with the crowd-kit-like contract of `MACE` and `DawidSkene` (fit / predict /
    competence_), so `campaign aggregate` and the `auto` default treat all three alike. Ties go to the
    label first in sorted order (a campaign needs one label); `majority_vote` keeps them for scoring.

    As a probability model (for scoring held-back labels) it is the one-coin model: every annotator gives
    the item's true label with one shared accuracy, else any other label; the truth is the vote share."""

    def __init__(self) -> None:
        self.items_: list = []
        self.labels_: list = []
        self.shares_: dict = {}
        self.accuracy_ = 0.0
        self.competence_: dict = {}

    def fit(self, labels: Iterable[tuple[Hashable, Hashable, Hashable]]) -> MajorityVote:
        triples = list(labels)
        if not triples:
            raise ValueError("at least one label is needed")
        self.labels_ = sorted({t[2] for t in triples}, key=repr)
        counts: dict[Hashable, dict[Hashable, int]] = {}
        for it, _, lab in triples:
            counts.setdefault(it, {}).setdefault(lab, 0)
            counts[it][lab] += 1
        self.items_ = sorted(counts, key=repr)
        self.shares_ = {it: {lab: n / sum(c.values()) for lab, n in c.items()} for it, c in counts.items()}
        pred = self.predict()
        agree: dict[Hashable, list[int]] = {}
        for it, w, lab in triples:
            agree.setdefault(w, []).append(int(pred[it] == lab))
        self.competence_ = {w: sum(v) / len(v) for w, v in agree.items()}
        self.accuracy_ = sum(sum(v) for v in agree.values()) / len(triples)
        return self

    def predict(self) -> dict:
        return {it: max(sorted(c, key=repr), key=lambda lab: c[lab]) for it, c in self.shares_.items()}

    def label_probability(self, items: list, labels: list, smoothing: float = 0.5) -> list[float]:
        """P(an annotator gives `label` to `item`) under the one-coin model, vote shares smoothed."""
        k = len(self.labels_)
        a = min(max(self.accuracy_, 1e-3), 1 - 1e-3)
        out = []
        for it, lab in zip(items, labels):
            c = self.shares_.get(it, {})
            q = {t: (c.get(t, 0.0) + smoothing / k) / (1.0 + smoothing) for t in self.labels_}
            out.append(sum(qt * (a if t == lab else (1 - a) / max(k - 1, 1)) for t, qt in q.items()))
        return out
