import numpy as np
import pytest

from campaign.aggregate.mace import MACE, accuracy, majority_vote
from campaign.paths import shared_data_dir

needs_data = pytest.mark.skipif(shared_data_dir() is None, reason="needs ../shared/data (real crowd data), absent on a fresh clone")


def synthetic(seed=0, items=300, good=6, spammers=6, labels=3):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, labels, items)
    out = []
    for i in range(items):
        for w in rng.choice(good + spammers, size=5, replace=False):
            if w < good:
                lab = truth[i] if rng.random() < 0.8 else rng.integers(0, labels)
            else:
                lab = 0  # a spammer who always answers the first label
            out.append((f"i{i}", f"w{w}", int(lab)))
    return out, {f"i{i}": int(t) for i, t in enumerate(truth)}


def test_mace_beats_majority_when_spammers_agree_with_each_other():
    labels, gold = synthetic()
    for method in ("vb", "em"):
        m = MACE(method=method, seed=1).fit(labels)
        assert accuracy(m.predict(), gold) > accuracy(majority_vote(labels), gold) + 0.05
        good = [m.competence_[f"w{k}"] for k in range(6)]
        spam = [m.competence_[f"w{k}"] for k in range(6, 12)]
        assert min(good) > max(spam)


def test_deterministic_given_the_seed():
    labels, _ = synthetic(seed=2)
    a, b = MACE(seed=5).fit(labels), MACE(seed=5).fit(labels)
    assert a.predict() == b.predict() and a.competence_ == b.competence_
    assert a.log_likelihood_ == b.log_likelihood_


def test_controls_fix_items_and_threshold_keeps_the_most_certain():
    labels, gold = synthetic(seed=3)
    m = MACE(controls={"i0": 2, "i1": 1}).fit(labels)
    assert m.predict()["i0"] == 2 and m.predict()["i1"] == 1
    m = MACE(threshold=0.5).fit(labels)
    kept = m.predict()
    assert len(kept) == 150
    dropped = [k for k in range(300) if f"i{k}" not in kept]
    kept_idx = [m.items_.index(k) for k in kept]
    assert max(m.entropy_[kept_idx]) <= min(m.entropy_[[m.items_.index(f"i{k}") for k in dropped]]) + 1e-12


def test_majority_ties_split():
    assert accuracy(majority_vote([("a", "w1", 1), ("a", "w2", 2)]), {"a": 1}) == 0.5


@needs_data
@pytest.mark.parametrize("task,ref", [("rte", 0.926), ("temp", 0.942), ("wsd", 0.994)])
def test_snow2008_matches_the_reference_mace(task, ref):
    from campaign.datasets import snow2008

    labels, gold = snow2008.load(task)
    acc = accuracy(MACE().fit(labels).predict(), gold)
    assert abs(acc - ref) <= 0.005, acc
