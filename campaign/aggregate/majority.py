"""Majority vote: the baseline every crowd aggregator has to beat.

Ties are kept (all tied labels returned) rather than broken arbitrarily, so that accuracy can split a
tie evenly: a coin flip's expected score, and the convention behind the published baselines (Snow et
al. 2008 report RTE 0.897 this way).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence


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


def accuracy(pred: Mapping[Hashable, Hashable | Sequence], gold: Mapping[Hashable, Hashable]) -> float:
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
