"""`campaign bench hostile`'s table: the with-minus-without gap of each stage and its paired standard error."""

from __future__ import annotations

import math
import statistics

import pytest

from campaign.bench.hostile import table


def _run(seed: int, adversaries: bool, value: float | None) -> dict:
    quality = {} if value is None else {"c/likert": {"measure": "Pearson", "value": value}}
    return {"seed": seed, "adversaries": adversaries, "quality": quality}


def test_the_gap_is_paired_by_seed_whatever_order_the_runs_came_in() -> None:
    runs = [_run(1, True, 0.90), _run(2, False, 0.70), _run(1, False, 0.95), _run(2, True, 0.72),
            _run(3, True, 0.80), _run(3, False, 0.81)]
    row = table(runs)["c/likert"]
    gaps = [0.90 - 0.95, 0.72 - 0.70, 0.80 - 0.81]
    assert row["differences_by_seed"] == {"1": round(gaps[0], 4), "2": round(gaps[1], 4), "3": round(gaps[2], 4)}
    assert row["difference_se"] == pytest.approx(statistics.stdev(gaps) / math.sqrt(3), abs=1e-4)
    assert row["difference"] == pytest.approx(statistics.mean(gaps), abs=1e-4)
    assert row["within_target"]


def test_a_seed_missing_one_of_its_runs_is_left_out_of_the_paired_gap() -> None:
    runs = [_run(1, True, 0.90), _run(1, False, 0.95), _run(2, True, 0.5), _run(2, False, None),
            _run(3, True, float("nan")), _run(3, False, 0.9)]
    row = table(runs)["c/likert"]
    assert row["differences_by_seed"] == {"1": -0.05}
    assert row["difference_se"] is None  # one pair has no spread to measure


def test_a_gap_beyond_the_target_is_reported_as_missed() -> None:
    row = table([_run(s, a, v) for s, a, v in ((1, True, 0.80), (1, False, 0.90), (2, True, 0.82), (2, False, 0.88))])["c/likert"]
    assert row["difference"] == pytest.approx(-0.08)
    assert row["difference_se"] == pytest.approx(0.02, abs=1e-4)
    assert not row["within_target"]
