"""Rejections within Prolific's rules and a pilot, on the in-process prolific-local road (the daemon in
this process on virtual time, the emulator as Prolific, simulated participants through the door).

One small campaign, a quarter of its crowd spammers, an attention check in every HIT and
`prolific.pilot: 4`:

- the traps shown say which answer to give (fair attention checks);
- the run pauses once the pilot's 4 places are decided, with a summary event (times, pay, attention
  checks, rejections) that `campaign status` shows; `campaign resume` runs the rest to the end, and
  nothing is charged twice;
- every rejection is FAILED_CHECK for a submission that failed two or more checks (the study is
  estimated at 5 minutes), TOO_QUICKLY or NO_CODE, never LOW_EFFORT, each with one message of its own;
  every decided submission with fewer failed checks is approved: a participant quality control excluded
  on agreement is paid, and their judgments are out of the scores.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path

import pytest
from sqlmodel import select

from campaign.daemon import RunOptions, run
from campaign.prolific.check_reader import store_checks
from campaign.prolific.checks import FAILED_CHECK, TOO_QUICKLY
from campaign.prolific.emulator.engine import REJECTION_CATEGORIES
from campaign.prolific.emulator.store import DocStore
from campaign.prolific.verdict import NO_WORK_CATEGORY
from campaign.spec import load_spec
from campaign.store import CampaignRow, EventRow, ItemRow, JudgmentRow, LedgerRow, Store, WorkerRow
from tests.prolific.contract import _spec, need_spec
from tests.support.cli import cli, cli_output
from tests.support.specs import campaign, first_propositions, simulated, write_spec
from tests.support.waiting import until

pytestmark = [pytest.mark.prolific]

PROLIFIC = {"reward": "0.50", "currency": "GBP", "bundle": 2, "estimated_minutes": 5, "maximum_minutes": 60,
            "devices": ["desktop"], "fee_rate": "0.333", "vat_rate": "0.2", "pilot": 4}


def _door_assignments(state: Path) -> dict[str, list[str]]:
    """submission -> the assignments it submitted, from the task site's door."""
    import sqlite3

    db = sqlite3.connect(state / "prolific-site" / "prolific-site.sqlite")
    try:
        rows = db.execute("SELECT submission_id, assignment_id FROM served WHERE state='submitted' ORDER BY rowid").fetchall()
    finally:
        db.close()
    out: dict[str, list[str]] = {}
    for sub, aid in rows:
        out.setdefault(sub, []).append(aid)
    return out


def test_the_emulator_takes_the_rejection_categories_prolific_describes_and_only_those() -> None:
    """The categories a rejection may carry are the description's enum (FAILED_ATTENTION_CHECK is a
    completion code's type there, not a rejection category); the emulator refuses any other with a 400
    (`tests/prolific/test_client.py`), and the categories the campaign sends are among them."""
    described = _spec(need_spec())["components"]["schemas"]["SubmissionTransitionRejectionCategory"]["enum"]
    assert REJECTION_CATEGORIES == set(described)
    assert {FAILED_CHECK, TOO_QUICKLY, NO_WORK_CATEGORY} <= set(described) and "FAILED_ATTENTION_CHECK" not in described


@pytest.mark.slow
def test_attention_checks_decide_rejections_and_a_pilot_pauses_until_resumed(tmp_path: Path) -> None:
    cfg = write_spec(tmp_path / "campaigns.yaml", campaign(
        "rules", propositions=first_propositions(tmp_path, 30), marketplace="prolific-local", prolific=PROLIFIC,
        task_site={"public_url": "http://127.0.0.1:0"}, budget="40.00",
        crowd=simulated(10, mix={"diligent": 0.6, "random_spammer": 0.3, "constant_spammer": 0.1}, arrival_span="10m"),
        quality={"max_excluded_share": 0.3},
        stages=[{"name": "likert", "kind": "likert", "assignments": 4, "auto_approval_delay": "1d",
                 "traps": {"share": 1.0, "texts": ["This sentence is not important."]}}]))
    spec = load_spec(cfg)
    state = tmp_path / "state"
    result: list[int] = []
    daemon = threading.Thread(target=lambda: result.append(run(spec, RunOptions(state_dir=state, seed=3, max_seconds=300))),
                              daemon=True)
    daemon.start()
    store = until(lambda: Store.open(state) if (state / "campaign.db").is_file() else None, timeout=60)
    try:
        def status() -> str:
            with store.session() as s:
                row = s.get(CampaignRow, "rules")
                return row.status if row is not None else ""
        until(lambda: status() == "paused" or not daemon.is_alive(), timeout=240, poll=0.2)
        assert status() == "paused", status()
        with store.session() as s:
            pilot = s.exec(select(EventRow).where(EventRow.campaign == "rules", EventRow.kind == "pilot")).all()
            charged_at_pause = {e.assignment_id for e in s.exec(select(LedgerRow).where(LedgerRow.campaign == "rules",
                                                                                       LedgerRow.kind == "charge")).all()}
        assert len(pilot) == 1
        figures = json.loads(pilot[0].data or "{}")
        # the pilot's 4 places: a rejected place reopens (as on Prolific), and a submission already taking it
        # is decided before the pause, so at least 4 and at most 4 more than the rejections are decided,
        # never more than 4 approved
        assert figures["approved"] + figures["rejected"] == figures["places"], figures
        assert 4 <= figures["places"] <= 4 + figures["rejected"] and figures["approved"] <= 4, figures
        assert figures["checks_seen"] >= 8 and 0 <= figures["checks_failed"] <= figures["checks_seen"]
        assert "median time" in pilot[0].message and "attention checks" in pilot[0].message
        assert "campaign resume rules" in pilot[0].message
        shown = cli_output("status", "--state", state, COLUMNS="200")
        assert "Prolific pilot" in shown.stdout and "pilot done" in shown.stdout, shown.stdout[-3000:]
        assert cli("resume", "rules", "--state", state) == 0
        daemon.join(timeout=300)
        assert result == [0], result
    finally:
        store.close()

    store = Store.open(state)
    try:
        with store.session() as s:
            traps = s.exec(select(ItemRow.text).where(ItemRow.campaign == "rules", ItemRow.is_trap == True)).all()  # noqa: E712
            workers = {w.worker_id: w for w in s.exec(select(WorkerRow).where(WorkerRow.campaign == "rules")).all()}
            judgments = s.exec(select(JudgmentRow).where(JudgmentRow.campaign == "rules")).all()
            charges = [e.assignment_id for e in s.exec(select(LedgerRow).where(LedgerRow.campaign == "rules",
                                                                                LedgerRow.kind == "charge")).all()]
            pilots = s.exec(select(EventRow).where(EventRow.campaign == "rules", EventRow.kind == "pilot")).all()
        checks = store_checks(store, spec.campaigns[0])
        door = _door_assignments(state)
    finally:
        store.close()
    assert traps and all("attention check" in t and "rate it 1" in t for t in traps), traps
    assert len(pilots) == 1  # paused once
    assert len(charges) == len(set(charges)) and charged_at_pause <= set(charges)  # nothing charged twice

    db = DocStore(state / "prolific" / "prolific.db")
    try:
        subs = db.all("submission")
        people = {p["id"]: "AP" + p["id"].upper() for p in db.all("participant")}
    finally:
        db.close()
    categories = Counter(s.get("rejection_category") for s in subs if s["status"] == "REJECTED")
    assert set(categories) <= {"FAILED_CHECK", "TOO_QUICKLY", "NO_CODE"}, categories
    excluded_paid = 0
    for sub in subs:
        if sub["status"] not in ("APPROVED", "REJECTED"):
            continue
        count = checks(door.get(sub["id"], []))
        worker = workers.get(people[sub["participant_id"]])
        if sub["status"] == "REJECTED":
            message = sub["rejection_message"]
            assert len(message) >= 100 and message.count("Thank you") == 1, message
            if sub["rejection_category"] == "FAILED_CHECK":
                assert count.failed >= 2, (sub["id"], count)
        else:
            assert count.failed < 2, (sub["id"], count)  # two failed checks are always rejected
            if worker is not None and worker.excluded:
                excluded_paid += 1
    assert categories["FAILED_CHECK"] >= 1, categories  # the spammers' failed checks were rejected
    # participants quality control excluded are paid for submissions that passed the checks, and their
    # judgments are out of the scores
    assert excluded_paid >= 1, [(w, x.excluded, x.reason) for w, x in workers.items()]
    out = {j.worker_id for j in judgments if not j.excluded and not j.item_key.startswith("trap:")}
    assert not [w for w, x in workers.items() if x.excluded and w in out]
    print(f"pilot: {pilots[0].message}\nrejections {dict(categories)}; submissions {Counter(s['status'] for s in subs)}; "
          f"excluded participants' approved submissions {excluded_paid}")


def test_the_runs_progress_line_shows_the_pilot_summary_while_paused() -> None:
    from campaign.progress import _line

    f = {"name": "rules", "status": "paused", "currency": "GBP", "pilot": "pilot done: 4 places decided (...)",
         "assignments": {"submitted": 8, "expected": 24, "approved": 8, "rejected": 0},
         "money": {"spent": "2.80", "reserved": "2.80", "budget": "40.00"}, "hits": {"posted": 6, "planned": 6, "completed": 0}}
    assert _line(f).splitlines()[-1] == "rules: pilot done: 4 places decided (...)"
    assert "pilot" not in _line({**f, "status": "running"})  # once resumed, the usual line only


def test_the_pilot_summary_gives_the_median_time_and_the_hourly_pay_at_it() -> None:
    from decimal import Decimal

    from campaign.steps.pilot import summary

    facts = [{"id": "a", "status": "APPROVED", "seconds": 240.0, "checks_seen": 2, "checks_failed": 0},
             {"id": "b", "status": "APPROVED", "seconds": 300.0, "checks_seen": 2, "checks_failed": 1},
             {"id": "c", "status": "REJECTED", "seconds": 360.0, "checks_seen": 2, "checks_failed": 2},
             {"id": "d", "status": "RETURNED", "seconds": None, "checks_seen": 1, "checks_failed": 0}]
    line, figures = summary(facts, Counter({"FAILED_CHECK": 1}), Decimal("0.50"), "GBP", 5)
    assert figures["median_seconds"] == 300.0 and figures["hourly_pay"] == "6.00"
    assert (figures["places"], figures["approved"], figures["rejected"], figures["returned_or_timed_out"]) == (3, 2, 1, 1)
    assert (figures["checks_seen"], figures["checks_failed"], figures["submissions_failing_a_check"]) == (7, 3, 2)
    assert "median time 5 min 0 s (estimated 5 min)" in line and "\u00a36.00 an hour at the median" in line
    assert "attention checks: 3 of 7 failed" in line and "rejections: FAILED_CHECK 1" in line


def test_validate_tells_which_places_the_pilot_runs() -> None:
    from dataclasses import replace

    from campaign.estimate import estimate_campaign, plan_items
    from tests.support.paths import ROOT

    c = load_spec(ROOT / "examples" / "prolific.yaml").campaigns[0]
    assert c.prolific is not None

    def notes(pilot: int) -> tuple[str, ...]:
        piloted = replace(c, prolific=replace(c.prolific, pilot=pilot))
        return estimate_campaign(piloted, plan_items(piloted)).notes

    assert "pilot: the first 4 places of stage likert's 12, then the campaign pauses for `campaign resume`" in notes(4)
    assert any("goes on into the next stage" in n for n in notes(13))
    assert any("more than the 32 places of the whole campaign" in n and "never pauses" in n for n in notes(40))


def test_a_bundle_of_hits_drawn_from_a_small_shortlist_rarely_fills() -> None:
    """The door gives nobody two HITs sharing an item: 10 HITs of 5 items from 30 almost never yield 5
    disjoint ones (those bundles end short, returned and paid per task, never rejected); HITs of distinct
    items always do; too few HITs never do."""
    from campaign.prolific.checks import full_bundle_chance

    assert full_bundle_chance(30, 5, 10, 5) < 0.05
    assert full_bundle_chance(10_000, 5, 10, 5) > 0.95
    assert full_bundle_chance(30, 5, 4, 5) == 0.0
    assert full_bundle_chance(30, 5, 10, 5) == full_bundle_chance(30, 5, 10, 5)  # seeded
