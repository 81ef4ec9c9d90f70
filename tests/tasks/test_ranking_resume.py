"""The ranking planner's persisted TrueSkill model: resuming it with the new rankings only gives the
same ratings, bit for bit, as replaying every ranking."""

from __future__ import annotations

import json
import random

from campaign.tasks.ranking import model_state, online_model, resumed_model


def _rankings(items: list[str], n: int, rng: random.Random) -> list[list[str]]:
    return [rng.sample(items, 5) for _ in range(n)]


def test_resumed_model_equals_a_replay_batch_after_batch():
    rng = random.Random(7)
    items = [f"p{i:03d}" for i in range(40)]
    ranks: list[list[str]] = []
    saved = None
    for _ in range(6):
        ranks += _rankings(items, 25, rng)
        model = resumed_model(items, ranks, saved)
        saved = json.loads(json.dumps(model_state(items, ranks, model)))  # as the store keeps it
        replay = online_model(items, ranks)
        assert model.means() == replay.means() and model.sigmas() == replay.sigmas()
        assert len(model.events) == 25  # only the new rankings were applied
    assert len(set(online_model(items, ranks).means())) > 1  # the rankings did move the ratings


def test_a_changed_earlier_ranking_means_a_replay():
    rng = random.Random(8)
    items = [f"p{i:03d}" for i in range(20)]
    ranks = _rankings(items, 30, rng)
    saved = json.loads(json.dumps(model_state(items, ranks, online_model(items, ranks))))
    changed = ranks[1:] + _rankings(items, 5, rng)  # quality control left the first ranking out
    model = resumed_model(items, changed, saved)
    replay = online_model(items, changed)
    assert model.means() == replay.means() and model.sigmas() == replay.sigmas()
    assert len(model.events) == len(changed)  # replayed from scratch


def test_prefix_and_full_digests_from_one_serialization():
    from campaign.tasks.ranking import _digest, _digests

    ranks = [["a", "b"], ["c", "d", "e"], [], ["f"]]
    for n in range(len(ranks) + 1):
        assert _digests(ranks, n) == (_digest(ranks[:n]), _digest(ranks))
    assert _digests([], 0) == (_digest([]), _digest([]))
