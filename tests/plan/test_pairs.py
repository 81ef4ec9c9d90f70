import numpy as np

from campaign.plan.pack import pack_pairs
from campaign.plan.pairs import (
    count_matrix,
    covering_items,
    expected_topk_precision,
    membership_probability,
    pair_budget,
    pair_scores,
    random_pairs,
    select_pairs,
    should_stop,
)


def _state():
    # 10 items, keep 5. Items 0..2 and 7..9 are settled far from the boundary; 3..6 sit on it.
    means = np.array([40, 38, 36, 26, 25.5, 24.5, 24, 14, 12, 10], dtype=float)
    sigmas = np.array([1, 1, 1, 4, 4, 4, 4, 1, 1, 1], dtype=float)
    return list("abcdefghij"), means, sigmas


def test_membership_probability_and_expected_precision():
    items, mu, sd = _state()
    p = membership_probability(mu, sd, keep=5)
    assert p[0] > 0.999 and p[9] < 0.001
    assert 0.3 < p[4] < 0.7
    assert 0.5 < expected_topk_precision(mu, sd, 5) < 1.0
    assert expected_topk_precision(mu, np.full(10, 0.01), 5) > 0.999


def test_prefers_uncertain_boundary_pairs_over_settled():
    items, mu, sd = _state()
    v = pair_scores(mu, sd, keep=5)
    assert v[4, 5] > 10 * v[0, 1]  # boundary pair beats a settled pair inside the kept set
    assert v[4, 5] > 10 * v[0, 9]  # ... and a settled pair across the boundary
    chosen = select_pairs(items, mu, sd, keep=5, batch_pairs=3, seed=1, max_per_item=3, planner="pairs")
    boundary = set("defg")
    assert all(a in boundary and b in boundary for a, b in chosen)


def test_repeat_discount_and_determinism():
    items, mu, sd = _state()
    first = select_pairs(items, mu, sd, keep=5, batch_pairs=4, seed=7, planner="pairs")
    assert first == select_pairs(items, mu, sd, keep=5, batch_pairs=4, seed=7, planner="pairs")
    assert len(set(map(frozenset, first))) == len(first)
    counts = count_matrix(items, [first[0]] * 50)
    again = select_pairs(items, mu, sd, keep=5, batch_pairs=4, seed=7, counts=counts, planner="pairs")
    assert first[0] not in again


def test_ties_broken_by_seed_only():
    items = [f"i{k}" for k in range(30)]
    mu, sd = np.full(30, 25.0), np.full(30, 8.0)
    a = select_pairs(items, mu, sd, keep=10, batch_pairs=20, seed=1, planner="pairs")
    b = select_pairs(items, mu, sd, keep=10, batch_pairs=20, seed=2, planner="pairs")
    assert a != b and len(a) == 20
    per_item = {}
    for x, y in a:
        per_item[x] = per_item.get(x, 0) + 1
        per_item[y] = per_item.get(y, 0) + 1
    assert max(per_item.values()) <= 4  # default cap max(4, 20/5)


def test_random_pairs_and_budget():
    items = list(range(20))
    a = random_pairs(items, 30, seed=3)
    assert a == random_pairs(items, 30, seed=3)
    assert len({frozenset(p) for p in a}) == 30 and all(x != y for x, y in a)
    counts = count_matrix(items, a)
    b = random_pairs(items, 30, seed=4, counts=counts)
    assert not ({frozenset(p) for p in a} & {frozenset(p) for p in b})  # unseen pairs first
    assert pair_budget(100) == 495
    stop, why = should_stop(100, 495)
    assert stop and "budget" in why
    _, mu, sd = _state()
    assert should_stop(10, 1, mu, np.full(10, 0.01), keep=5, budget=100, target=0.95)[0]
    assert not should_stop(10, 1, mu, sd, keep=5, budget=100, target=0.999)[0]


def test_window_planner_ranks_the_boundary_items_together():
    items, mu, sd = _state()
    chosen = select_pairs(items, mu, sd, keep=5, batch_pairs=10, seed=1)  # one 5-item window
    members = {x for p in chosen for x in p}
    assert len(chosen) == 10 and len(members) == 5 and set("defg") <= members
    assert {frozenset(h) for h in pack_pairs(chosen, size=5)} == {frozenset(members)}


def test_window_planner_spreads_over_unseen_items_and_packs_back_into_its_windows():
    items = [f"i{k}" for k in range(30)]
    mu, sd = np.full(30, 25.0), np.full(30, 8.0)
    seen = [("i0", "i1")] * 8 + [("i2", "i3")] * 8
    chosen = select_pairs(items, mu, sd, keep=10, batch_pairs=50, seed=3, counts=count_matrix(items, seen))
    members = [x for p in chosen for x in p]
    assert len(chosen) == 50 and len(set(members)) == 25  # five disjoint windows
    assert not {"i0", "i1", "i2", "i3"} & set(members)  # shown often already: the unseen go first
    hits = pack_pairs(chosen, size=5)
    anchored = pack_pairs(select_pairs(items, mu, sd, keep=10, batch_pairs=50, seed=3, counts=count_matrix(items, seen),
                                       planner="window-anchored"), size=5)
    for h in anchored:  # shown items only as anchors, one per window, beside unseen ones
        assert len({"i0", "i1", "i2", "i3"} & set(h)) <= 1
    assert sum(1 for h in anchored if {"i0", "i1", "i2", "i3"} & set(h)) == 4
    assert len(hits) == 5 and {frozenset(p) for h in hits for p in __import__("itertools").combinations(h, 2)} == \
        {frozenset(p) for p in chosen}
    assert chosen == select_pairs(items, mu, sd, keep=10, batch_pairs=50, seed=3, counts=count_matrix(items, seen))


def test_window_planner_drops_the_unseen_head_start_once_shown_items_could_fill_the_top():
    items = [f"i{k}" for k in range(40)]
    mu, sd = np.full(40, 25.0), np.full(40, 8.0)  # equal posteriors: only appearances tell items apart
    assert covering_items(4, 5) == 10 and covering_items(50, 5) == 125  # winner + runner-up per 5-item window

    def shown_in_batch(groups_shown: int) -> set[str]:
        shown = items[: 5 * groups_shown]
        seen = [(a, b) for g in range(groups_shown) for a in shown[5 * g:5 * g + 5] for b in shown[5 * g:5 * g + 5] if a < b]
        chosen = select_pairs(items, mu, sd, keep=4, batch_pairs=50, seed=3, counts=count_matrix(items, seen))
        assert len(chosen) == 50
        return {x for p in chosen for x in p} & set(shown)

    assert shown_in_batch(1) == set()  # 5 shown < 10: the five windows take unseen items only
    assert shown_in_batch(2)  # 10 shown: an unseen item counts as shown once, so shown ones compete
