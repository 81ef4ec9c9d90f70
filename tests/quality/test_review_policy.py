import numpy as np

from campaign.crowd.models import likert_answer, make_pool
from campaign.quality.evidence import Label, TrapResult
from campaign.quality.review import PolicyConfig, review


def simulate(spam_share: float, seed: int = 3, items: int = 120, workers: int = 24, per_item: int = 5):
    rng = np.random.default_rng(seed)
    mix = {"diligent": 0.6 * (1 - spam_share), "noisy": 0.25 * (1 - spam_share), "biased": 0.15 * (1 - spam_share)}
    if spam_share:
        mix |= {"random_spammer": spam_share / 2, "constant_spammer": spam_share / 2}
    pool = make_pool(workers, seed, mix)
    truth = rng.uniform(0, 1, items)
    labels, traps = [], []
    for i in range(items):
        for w in rng.choice(pool, size=per_item, replace=False):
            labels.append(Label(f"i{i}", w.worker_id, f"{w.worker_id}-{i}", float(likert_answer(w, truth[i], rng))))
            if i % 10 == 0:
                v = float(likert_answer(w, 0.0, rng))
                traps.append(TrapResult(w.worker_id, f"{w.worker_id}-{i}", "trap:t", v, v <= 2))
    return pool, labels, traps


def test_never_rejects_or_blocks_a_good_worker():
    for seed in range(4):
        pool, labels, traps = simulate(0.25, seed=seed)
        res = review(labels, traps, PolicyConfig(block=True))
        good = {w.worker_id for w in pool if not w.is_spammer}
        assert not (res.workers("reject") | res.workers("block")) & good


def test_spammers_are_excluded_beyond_the_cap_and_weak_workers_within_it():
    pool, labels, traps = simulate(0.25)
    spam = {w.worker_id for w in pool if w.is_spammer}
    res = review(labels, traps, PolicyConfig())
    spam_labels = sum(1 for l in labels if l.worker in spam)
    excluded_spam = sum(1 for l in labels if l.worker in spam and l.worker in res.excluded)
    assert excluded_spam / spam_labels > 0.8
    weak = [d for d in res.decisions if d.kind == "exclude" and "low agreement" in d.reason]
    weak_labels = sum(res.evidence[d.worker].labels for d in weak)
    assert weak_labels <= 0.05 * len(labels)


def test_every_decision_has_a_reason_and_evidence():
    _, labels, traps = simulate(0.1)
    res = review(labels, traps, PolicyConfig(bonus=__import__("decimal").Decimal("0.10")))
    assert res.decisions
    for d in res.decisions:
        assert d.reason and "shared_items" in d.evidence
    assert res.workers("bonus")


def test_clean_crowd_is_left_alone():
    _, labels, traps = simulate(0.0)
    res = review(labels, traps, PolicyConfig())
    assert not res.workers("reject")
    assert sum(res.evidence[w].labels for w in res.excluded) <= 0.05 * len(labels)


def test_a_weakly_agreeing_honest_crowd_is_not_called_spam():
    """Everyone honest but the task hard (worker-rest r around 0.3): a fixed r threshold would exclude the
    unlucky; the Fisher-z safeguard asks for r significantly below the crowd's median first."""
    rng = np.random.default_rng(11)
    truth = rng.uniform(0, 1, 150)
    labels = []
    for i, t in enumerate(truth):
        for w in rng.choice(30, size=5, replace=False):
            labels.append(Label(f"i{i}", f"W{w}", f"W{w}-{i}", float(t + rng.normal(0, 0.6))))
    plain = review(labels, [], PolicyConfig(significance_se=0.0))
    guarded = review(labels, [], PolicyConfig())
    assert plain.excluded  # the fixed threshold does exclude honest workers here
    assert not guarded.excluded
    for d in plain.decisions:
        assert "crowd_median_r" in d.evidence and "se_below_median" in d.evidence
