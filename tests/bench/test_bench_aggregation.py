"""`campaign bench aggregation`: the simulated conditions do what they claim (the majority-wrong ones
leave majority vote far behind a model, the models-fail ones leave a model behind majority vote), and
the table's JSON holds the per-draw verdicts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from campaign.aggregate.dawid_skene import DawidSkene
from campaign.aggregate.majority import MajorityVote, accuracy
from campaign.bench import aggregation


def accuracies(condition: str, d: int = 0) -> dict[str, float]:
    rng = np.random.default_rng([30, d, list(aggregation.CONDITIONS).index(condition)])
    labels, truth = aggregation.draw(aggregation.CONDITIONS[condition][1](rng), rng)
    return {"majority": accuracy(MajorityVote().fit(labels).predict(), truth), "ds": accuracy(DawidSkene().fit(labels).predict(), truth)}


@pytest.mark.parametrize("condition", ["biased_crowd", "confusable_pair", "few_good"])
def test_majority_wrong_conditions_leave_majority_vote_behind(condition):
    acc = accuracies(condition)
    assert acc["ds"] >= acc["majority"] + 0.05


@pytest.mark.parametrize("condition", ["three_labels", "rare_class"])
def test_models_fail_conditions_leave_a_model_behind(condition):
    acc = accuracies(condition)
    assert acc["ds"] <= acc["majority"] - 0.01


def test_draws_are_seeded():
    rng1, rng2 = np.random.default_rng([30, 1, 0]), np.random.default_rng([30, 1, 0])
    assert aggregation.draw(aggregation.biased_crowd(rng1), rng1) == aggregation.draw(aggregation.biased_crowd(rng2), rng2)


@pytest.mark.slow
def test_json_has_per_draw_verdicts(capsys, monkeypatch):
    monkeypatch.setattr(aggregation, "shared_data_dir", lambda: None)
    assert aggregation.main(["--draws", "2", "--condition", "few_good", "--real", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["per_draw"]["few_good"]
    assert len(rows) == 2 and all(r["within"] and r["chose"] != "majority" for r in rows)
    assert out["simulated"]["few_good"]["within_all"] is True
    assert "absent" in out["real_skipped"]
