"""A resume refused for a changed spec says what changed (`campaign.daemon.spec_changes`): it gave two
fingerprints, which told the researcher nothing about which line to restore."""

from __future__ import annotations

from contextlib import closing

import pytest

from campaign.daemon import RunError, ensure_campaign_row, spec_changes
from campaign.spec import load_spec
from campaign.store import Store
from tests.support.specs import NO_CROWD, campaign, write_spec


def test_a_changed_reward_is_named_with_both_values(tmp_path) -> None:
    def spec(reward: str):
        return load_spec(write_spec(tmp_path / "c.yaml", campaign("c", task={"kind": "likert", "reward": reward},
                                                                  budget="5.00", crowd=NO_CROWD))).campaigns[0]

    with closing(Store.open(tmp_path / "state")) as store:
        ensure_campaign_row(store, spec("0.06"), 0)
        with pytest.raises(RunError) as refused:
            ensure_campaign_row(store, spec("0.07"), 0)
    assert 'started from a different spec: stages[0].reward: "0.06" -> "0.07"; resuming would mix' in str(refused.value)


def test_changes_are_listed_up_to_a_limit_and_keys_of_one_side_are_left_out() -> None:
    stored = {"instance": "ab", "budget": "5.00", "stages": [{"a": 1, "b": [1, 2]}], "old": 1}
    now = {"budget": "6.00", "stages": [{"a": 2, "b": [1, 3]}], "new": 2}
    assert spec_changes(stored, now) == ['budget: "5.00" -> "6.00"', "stages[0].a: 1 -> 2", "stages[0].b[1]: 2 -> 3"]
    many = spec_changes({f"k{i}": i for i in range(8)}, {f"k{i}": -i - 1 for i in range(8)}, limit=5)
    assert len(many) == 6 and many[-1] == "and 3 more"
    assert spec_changes({"t": "x" * 100}, {"t": "y"})[0] == 't: "' + "x" * 36 + '... -> "y"'
