"""The `auto` default for categorical stages: never far below majority vote, also where MACE or
Dawid-Skene fail (few labels per item, a rare class with one-sided errors, correlated annotators), and
a model where the data support one."""

import numpy as np
import pytest

from campaign.aggregate.auto import AutoAggregator, aggregate, holdout_split
from campaign.aggregate.majority import accuracy
from campaign.paths import shared_data_dir


def simulate(seed, items=400, per_item=3, workers=30, prior=(0.5, 0.5), acc=(0.55, 0.95), clique=0, clique_err=0.0,
             errors_say=None):
    """Worker w is right with probability acc_w, else draws from their own strategy (or always says
    `errors_say`). The first `clique` workers copy one shared opinion per item, wrong `clique_err` of
    the time: correlated annotators, which every independence model over-trusts."""
    rng = np.random.default_rng(seed)
    k = len(prior)
    truth = rng.choice(k, size=items, p=prior)
    accs = rng.uniform(*acc, size=workers)
    strategy = rng.dirichlet(np.ones(k) * 0.7, size=workers)
    if errors_say is not None:
        strategy[:] = np.eye(k)[errors_say]
    labels = []
    for i, t in enumerate(truth):
        shared = t if rng.random() > clique_err else int(rng.integers(k))
        for w in rng.choice(workers, size=per_item, replace=False):
            lab = shared if w < clique else (t if rng.random() < accs[w] else int(rng.choice(k, p=strategy[w])))
            labels.append((i, int(w), lab))
    return labels, dict(enumerate(int(t) for t in truth))


def run(draws=3, **kw):
    out = []
    for seed in range(draws):
        labels, gold = simulate(seed, **kw)
        auto = AutoAggregator().fit(labels)
        acc = {name: accuracy(m.predict(), gold) for name, m in auto.models_.items()}
        acc["auto"] = accuracy(auto.predict(), gold)
        out.append((acc, auto.method_))
    return out


@pytest.mark.parametrize("condition", [
    {"per_item": 3, "workers": 60},  # few labels per item: the models over-fit (measured: MACE .944, DS .951, MV .967)
    {"per_item": 3, "workers": 60, "prior": (0.88, 0.12), "errors_say": 1},  # rare class, errors say "rare"
    {"per_item": 3, "clique": 6, "clique_err": 0.6},  # correlated annotators
    {"per_item": 5, "clique": 8, "clique_err": 0.5},
])
@pytest.mark.slow
def test_auto_is_never_far_below_majority_vote(condition):
    runs = run(**condition)
    for acc, _ in runs:
        assert acc["auto"] >= acc["majority"] - 0.02
    assert np.mean([a["auto"] - a["majority"] for a, _ in runs]) >= -0.005


@pytest.mark.slow
def test_the_failing_conditions_do_fail_the_models():
    """The simulation must reproduce the issue's failure, else the tests above prove nothing."""
    runs = run(per_item=3, workers=60, prior=(0.88, 0.12), errors_say=1)
    assert np.mean([a["mace"] for a, _ in runs]) < np.mean([a["majority"] for a, _ in runs]) - 0.02
    few = run(per_item=3, workers=60)
    assert np.mean([a["ds"] for a, _ in few]) < np.mean([a["majority"] for a, _ in few])
    assert all(m == "majority" for _, m in runs + few)


@pytest.mark.slow
def test_a_model_is_chosen_when_the_data_support_it():
    runs = run(per_item=5)
    assert sum(m != "majority" for _, m in runs) >= 2
    assert np.mean([a["auto"] - a["majority"] for a, _ in runs]) > 0


def test_holdout_takes_one_label_from_items_with_three_or_more():
    labels = [(i, w, 0) for i in range(10) for w in range(2 + i % 3)]
    train, test = holdout_split(labels, seed=1)
    assert len(test) == sum(1 for i in range(10) if 2 + i % 3 >= 3)
    assert len({t[0] for t in test}) == len(test) and len(train) + len(test) == len(labels)


def test_aggregate_contract():
    labels, _ = simulate(0, items=50, per_item=5)
    items, competence, method, evidence = aggregate(labels, "auto")
    assert set(items) == set(range(50)) and method in ("majority", "mace", "ds")
    assert "reason" in evidence and set(competence) == {w for _, w, _ in labels}
    for m in ("majority", "mace", "ds"):
        assert aggregate(labels, m)[2] == m
    with pytest.raises(ValueError):
        aggregate(labels, "nope")


@pytest.mark.shared_data
@pytest.mark.skipif(shared_data_dir() is None, reason="needs ../shared/data (real crowd data), absent on a fresh clone")
def test_auto_on_snow2008_is_at_least_majority_vote():
    from campaign.datasets import snow2008

    for task in ("rte", "temp", "wsd"):
        labels, gold = snow2008.load(task)
        auto = AutoAggregator().fit(labels)
        assert accuracy(auto.predict(), gold) >= accuracy(auto.models_["majority"].predict(), gold), task
