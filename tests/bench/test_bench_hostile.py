"""`campaign bench hostile`'s table (the with-minus-without gap of each stage and its paired standard error)
and its check of the books (ledger against the marketplace and Prolific)."""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
from pathlib import Path

import pytest

from campaign.bench.hostile import books_check, table


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


# --------------------------------------------------------------------------------------------- the books

def _state(tmp_path: Path, ledger: list[tuple[str, str, str, str | None]], market_spent: int,
           approved: list[tuple[str, str, int]], prolific: list[tuple[str, str, int]], status: str = "finished") -> Path:
    """A state folder with just the columns `books_check` reads: campaign `mt` on the built-in marketplace,
    `pr` on Prolific (whose HIT `H-pr` lives on the marketplace as the task site's)."""
    state = tmp_path / "state"
    (state / "market").mkdir(parents=True)
    (state / "prolific").mkdir()
    with sqlite3.connect(state / "campaign.db") as con:
        con.execute("CREATE TABLE campaigns (name TEXT, status TEXT, spec_json TEXT)")
        con.executemany("INSERT INTO campaigns VALUES (?,?,?)", [("mt", status, json.dumps({"prolific": None})),
                                                                 ("pr", status, json.dumps({"prolific": {"reward": "0.75"}}))])
        con.execute("CREATE TABLE ledger (campaign TEXT, kind TEXT, amount TEXT, assignment_id TEXT)")
        con.executemany("INSERT INTO ledger VALUES (?,?,?,?)", ledger)
        con.execute("CREATE TABLE hits (hit_id TEXT, campaign TEXT)")
        con.executemany("INSERT INTO hits VALUES (?,?)", [("H-mt", "mt"), ("H-pr", "pr")])
    with sqlite3.connect(state / "market" / "market.db") as con:
        con.execute("CREATE TABLE accounts (spent_cents INTEGER)")
        con.execute("INSERT INTO accounts VALUES (?)", (market_spent,))
        con.execute("CREATE TABLE hits (id TEXT, unit_cost_cents INTEGER)")
        con.executemany("INSERT INTO hits VALUES (?,?)", [("H-mt", 7), ("H-pr", 1)])
        con.execute("CREATE TABLE assignments (id TEXT, hit_id TEXT, status TEXT)")
        con.executemany("INSERT INTO assignments VALUES (?,?,'Approved')", [(a, h) for a, h, _ in approved])
    with sqlite3.connect(state / "prolific" / "prolific.db") as con:
        con.execute("CREATE TABLE charges (what TEXT, ref TEXT, rewards INTEGER, fees INTEGER, vat INTEGER)")
        con.executemany("INSERT INTO charges VALUES (?,?,?,0,0)", prolific)
    return state


BALANCED = [("mt", "reserve", "0.14", None), ("mt", "charge", "0.07", "A1"), ("mt", "charge", "0.07", "A2"),
            ("pr", "reserve", "2.10", None), ("pr", "charge", "1.05", "S1"), ("pr", "release", "1.05", None)]


def test_books_that_agree_say_nothing(tmp_path: Path) -> None:
    # the marketplace spent 14 cents on mt's two answers and 1 on the task site's own HIT for Prolific
    state = _state(tmp_path, BALANCED, 15, [("A1", "H-mt", 7), ("A2", "H-mt", 7), ("P1", "H-pr", 1)], [("reward", "S1", 105)])
    assert books_check(state) == []


def test_each_disagreement_is_named(tmp_path: Path) -> None:
    ledger = [*BALANCED, ("mt", "charge", "0.07", "A2"), ("pr", "reserve", "1.05", None)]
    state = _state(tmp_path, ledger, 14, [("A1", "H-mt", 7), ("A3", "H-mt", 7)], [("reward", "S1", 105), ("reward", "S1", 105)])
    said = books_check(state)
    assert "mt: assignment A2 charged 2 times" in said
    assert "mt: finished with -0.07 still reserved" in said
    assert "pr: finished with 1.05 still reserved" in said
    assert "the marketplace spent 0.14 but the ledger charged 0.21" in said
    assert "1 approved on the marketplace and not charged in the ledger, 1 charged and not approved" in said
    assert "Prolific charged reward S1 2 times" in said
    assert "Prolific charged 2.1 but the ledger charged 1.05" in said
    assert len(said) == 7, said


def test_a_campaign_still_running_may_hold_reservations(tmp_path: Path) -> None:
    ledger = [*BALANCED, ("pr", "reserve", "1.05", None)]
    state = _state(tmp_path, ledger, 15, [("A1", "H-mt", 7), ("A2", "H-mt", 7), ("P1", "H-pr", 1)], [("reward", "S1", 105)],
                   status="running")
    assert books_check(state) == []
