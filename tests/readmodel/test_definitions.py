"""One definition per figure: the dashboard's summary line, its stage panel and `campaign status` show
the same agreement `r`, the same share of labels excluded, and answers per hour over the same window
as the workers counted active (the dashboard once showed `r 0.73` beside `0.59`, `labels excl 30/300`
beside `excl 20%`, and `0 answers/h` beside `51 workers active`)."""

from __future__ import annotations

import io
import json
import re

from rich.console import Console

from campaign.dashboard.screen import UIState, build
from campaign.readmodel.definitions import excluded_text, last_hour, trap_pass_rate, weighted_agreement
from campaign.readmodel.figures import campaign_figures
from campaign.readmodel.snapshot import Reader
from campaign.store import AssignmentRow, CampaignRow, HitRow, JudgmentRow, Store, WorkerRow

NOW = 1_000_000.0


def _store(tmp_path):
    """A agrees (r 0.9) and answered long ago; B disagrees (r 0.1) and answered in the last minutes, so the
    newest stretch of the agreement history is B's alone; 1 of B's 2 labels per answer is excluded."""
    store = Store.open(tmp_path)
    spec = {"stages": [{"name": "likert", "kind": "likert"}], "crowd": {"kind": "none"}}
    with store.session() as s:
        s.add(CampaignRow(name="c", fingerprint="f", spec_json=json.dumps(spec), budget="5.00", status="running"))
        s.add(HitRow(campaign="c", stage="likert", hit_key="h", item_keys="[]", annotation="a", token="t", status="posted",
                     reward="0.06", assignments=20))
        for k in range(10):
            for w, t in (("A", NOW - 20 * 3600 + k * 60), ("B", NOW - 1800 + k * 60)):
                aid = f"{w}{k}"
                s.add(AssignmentRow(assignment_id=aid, campaign="c", stage="likert", hit_key="h", hit_id="H", worker_id=w,
                                    status="approved", answer_xml="", collected_at=t))
                for i in range(2):
                    s.add(JudgmentRow(campaign="c", stage="likert", assignment_id=aid, worker_id=w, item_key=f"p{k}{i}", value=3.0,
                                      excluded=w == "B" and i == 0))
        for w, r in (("A", 0.9), ("B", 0.1)):
            s.add(WorkerRow(campaign="c", worker_id=w, evidence=json.dumps({"correlation": r, "labels": 20})))
    return store


def test_pure_definitions():
    assert weighted_agreement([{"correlation": 0.9, "labels": 30}, {"correlation": 0.1, "labels": 10}, {"labels": 5}]) == 0.7
    assert weighted_agreement([{"labels": 3}]) is None
    assert excluded_text(300, 30) == "30/300 (10%)" and excluded_text(0, 0) == "0/0"
    assert last_hour([10.0, 3000.0, 3700.0], ["a", "b", "c"], 3700.0) == (2, {"b", "c"})
    assert trap_pass_rate([{"traps_seen": 4, "traps_passed": 3}, {"traps_seen": 6, "traps_passed": 6}, {}]) == 0.9
    assert trap_pass_rate([{}]) is None


def test_dashboard_and_status_show_one_value_per_figure(tmp_path):
    store = _store(tmp_path)
    view = Reader(store).campaign("c", NOW)
    figures = campaign_figures(store, "c", now=NOW)
    snap = Reader(store).snapshot(NOW)
    store.close()
    console = Console(file=io.StringIO(), width=160, height=50, force_terminal=False, color_system=None)
    console.print(build(snap, UIState(), 160, 50))
    screen = " ".join(console.file.getvalue().split())
    # the agreement-drop alert speaks of "the newest answers" (its own window, named): left out here
    screen = re.sub(r"ALERT .*?newest answers\)", "", screen)
    # agreement: r 0.50 in the summary, in the stage panel beside its history, and in status --json
    assert view.agreement == 0.5 and figures["quality"]["agreement"] == 0.5
    assert view.stages[0].agreement_now == 0.5
    assert "r 0.50" in screen and re.search(r"agree [^a-z]*? 0\.50 traps", screen) and not re.search(r"\b0\.10\b", screen), screen
    # labels excluded: 10 of 40 in the summary, 25% in the panel, the same text in status
    assert "labels excl" in screen and "10/40 (25%)" in screen and re.search(r"excl [^a-z0-9]*? 25%", screen), screen
    assert figures["quality"]["labels_excluded_text"] == "10/40 (25%)"
    # activity: B's 10 answers in the last hour, from B alone
    assert view.answers_per_hour == 10 and view.workers_active == {"B"}
    assert "last hour: 10 answers from 1 workers" in screen


def test_a_cancel_says_what_it_waits_for(tmp_path):
    store = _store(tmp_path)
    with store.session() as s:
        row = s.get(CampaignRow, "c")
        assert row is not None
        row.status = "cancelling"
        s.add(row)
    figures = campaign_figures(store, "c", now=NOW)
    snap = Reader(store).snapshot(NOW)
    store.close()
    wanted = "waiting for 1 HIT a worker accepted before the cancel"
    assert figures["waiting_for"].startswith(wanted)
    console = Console(file=io.StringIO(), width=80, height=40, force_terminal=False, color_system=None)
    console.print(build(snap, UIState(), 80, 40))
    assert wanted in " ".join(console.file.getvalue().split()).replace("│ ", "")
    from campaign.dashboard.view import build as status_build

    console = Console(file=io.StringIO(), width=80, force_terminal=False, color_system=None)
    console.print(status_build({"campaigns": [figures]}, 80))
    assert "cancelling: " + wanted in " ".join(console.file.getvalue().split())
