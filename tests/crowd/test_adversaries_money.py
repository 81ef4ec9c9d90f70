"""The check `campaign bench hostile` runs on every run's state: no payment for work without a valid answer,
from the store's ledger, the built-in marketplace and the Prolific emulator. Here on small databases
with the same tables, each holding one payment that must be found, next to ones that are fine."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from campaign.bench.hostile import nugget_f1, unpaid_check


def _db(path: Path, script: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.executescript(script)
    con.commit()
    con.close()


def _state(tmp_path: Path, *, bad_ledger: bool = False, bad_market: bool = False, bad_prolific: bool = False) -> Path:
    spec_local, spec_prolific = json.dumps({"prolific": None}), json.dumps({"prolific": {"currency": "GBP"}})
    _db(tmp_path / "campaign.db", f"""
        CREATE TABLE campaigns (name TEXT, spec_json TEXT);
        INSERT INTO campaigns VALUES ('local', '{spec_local}'), ('pro', '{spec_prolific}');
        CREATE TABLE assignments (assignment_id TEXT, valid INTEGER);
        INSERT INTO assignments VALUES ('A1', 1), ('A2', 0), ('P1', 1), ('P2', 0);
        CREATE TABLE judgments (assignment_id TEXT);
        INSERT INTO judgments VALUES ('A1'), ('P1');
        CREATE TABLE hits (hit_id TEXT, campaign TEXT);
        INSERT INTO hits VALUES ('H1', 'local'), ('HP', 'pro');
        CREATE TABLE ledger (kind TEXT, assignment_id TEXT, campaign TEXT);
        INSERT INTO ledger VALUES ('charge', 'A1', 'local'), ('charge', 'S1', 'pro'), ('reserve', NULL, 'local')
          {", ('charge', 'A2', 'local')" if bad_ledger else ""};
        CREATE TABLE events (kind TEXT, level TEXT);
    """)
    _db(tmp_path / "market" / "market.db", f"""
        CREATE TABLE assignments (id TEXT, hit_id TEXT, status TEXT);
        INSERT INTO assignments VALUES ('A1', 'H1', 'Approved'), ('A2', 'H1', '{"Approved" if bad_market else "Rejected"}'),
          ('P2', 'HP', 'Approved');
        CREATE TABLE bonuses (assignment_id TEXT);
    """)
    _db(tmp_path / "prolific-site" / "prolific-site.sqlite", """
        CREATE TABLE served (assignment_id TEXT, submission_id TEXT);
        INSERT INTO served VALUES ('P1', 'S1'), ('P2', 'S2');
    """)
    bonus = json.dumps({"lines": [{"submission_id": "S2"}]})
    _db(tmp_path / "prolific" / "prolific.db", f"""
        CREATE TABLE charges (what TEXT, ref TEXT);
        INSERT INTO charges VALUES ('reward', 'S1') {", ('reward', 'S3'), ('bonus', 'B1:1:0')" if bad_prolific else ""};
        CREATE TABLE docs (kind TEXT, id TEXT, body TEXT);
        INSERT INTO docs VALUES ('bonus', 'B1', '{bonus}');
    """)
    return tmp_path


def test_clean_state_has_no_violation(tmp_path: Path) -> None:
    got = unpaid_check(_state(tmp_path))
    # P2 (Prolific, invalid) was approved on the inner marketplace, which pays nothing: Prolific pays
    assert got == {"violations": [], "checked": {"ledger": 2, "market": 1, "prolific": 1}}


def test_each_unearned_payment_is_found(tmp_path: Path) -> None:
    assert unpaid_check(_state(tmp_path / "l", bad_ledger=True))["violations"] == ["ledger charge for A2 (local): no valid answer"]
    assert unpaid_check(_state(tmp_path / "m", bad_market=True))["violations"] == [
        "marketplace approved A2 (HIT H1): no valid answer in the store"]
    assert unpaid_check(_state(tmp_path / "p", bad_prolific=True))["violations"] == [
        "Prolific reward charge S3: no submitted assignment with a valid answer",  # a place paid with no work at all
        "Prolific bonus charge B1:1:0: no submitted assignment with a valid answer"]  # a bonus on invalid work


def test_nugget_f1_against_the_simulated_truth() -> None:
    sentences = {"s1": "The bottles leak chemicals into water .", "s2": "Short one .", "s3": "Nobody cares about this at all ."}
    truth = {"s1": 0.9, "s2": 0.9, "s3": 0.1}
    exact = [{"item": "s1", "first": 0, "last": 5}]
    assert nugget_f1(exact, sentences, truth) == 1.0  # s2 is too short to hold a nugget; s3 is unimportant
    assert nugget_f1(exact + [{"item": "s3", "first": 0, "last": 5}], sentences, truth) == 2 * 0.5 / 1.5
    assert nugget_f1([{"item": "s1", "first": 4, "last": 5}], sentences, truth) == 0.0  # overlap 2/6 < 0.5
    assert nugget_f1([], sentences, truth) == 0.0
