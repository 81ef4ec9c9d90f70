from __future__ import annotations

import logging

from campaign.commands import build_parser
from campaign.store import Store


def test_store_events_are_mirrored_to_the_log_at_their_level(tmp_path, caplog):
    store = Store.open(tmp_path)
    try:
        with caplog.at_level(logging.DEBUG, logger="campaign.events"):
            store.event("c", "planned", "stage likert: 12 HITs planned")
            store.event("c", "budget_stop", "no money left", level="warning")
            store.event("c", "step_error", "boom", level="error")
    finally:
        store.close()
    got = [(r.name, r.levelno, r.getMessage()) for r in caplog.records if r.name == "campaign.events"]
    assert got == [("campaign.events", logging.INFO, "c planned: stage likert: 12 HITs planned"),
                   ("campaign.events", logging.WARNING, "c budget_stop: no money left"),
                   ("campaign.events", logging.ERROR, "c step_error: boom")]


def test_run_takes_a_log_level():
    assert build_parser().parse_args(["run", "--log-level", "debug"]).log_level == "DEBUG"
    assert build_parser().parse_args(["run"]).log_level is None
