"""`campaign pause|resume|cancel`: one conditional UPDATE each, so a status the daemon set meanwhile
(finished, budget_exhausted, blocked) is never overwritten: before, the command read the status and
wrote its own in a second statement, and a campaign that finished in between became paused or
cancelling again."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import event
from sqlmodel import select

from campaign.store import CampaignRow, EventRow, Store
from tests.support.cli import cli


def _store(tmp_path, status: str) -> Store:
    store = Store.open(tmp_path / "state")
    with store.session() as s:
        s.add(CampaignRow(name="c", fingerprint="f", spec_json=json.dumps({"stages": []}), budget="10.00", status=status))
    return store


def _status(store: Store) -> str:
    with store.session() as s:
        row = s.get(CampaignRow, "c")
        assert row is not None
        return row.status


@pytest.mark.parametrize(("command", "before", "after"), [("pause", "running", "paused"), ("resume", "paused", "running"),
                                                          ("resume", "blocked", "running"), ("cancel", "paused", "cancelling")])
def test_an_allowed_change_is_made_with_its_event(tmp_path, command, before, after):
    store = _store(tmp_path, before)
    assert cli(command, "c", "--state", tmp_path / "state") == 0
    assert _status(store) == after
    with store.session() as s:
        assert [e.kind for e in s.exec(select(EventRow)).all()] == [command]


def test_a_campaign_the_daemon_finishes_meanwhile_stays_finished(tmp_path, capsys):
    store = _store(tmp_path, "running")
    import campaign.ops

    opened = campaign.ops.open_existing

    def open_then_finish(args):  # the daemon finishes the campaign just as the command starts its write
        st = opened(args)

        done: list[bool] = []

        @event.listens_for(st.engine, "before_cursor_execute")
        def finish_first(conn, cursor, statement, params, context, executemany):
            if statement.lstrip().upper().startswith("UPDATE CAMPAIGNS") and not done:
                done.append(True)
                with store.session() as s:
                    row = s.get(CampaignRow, "c")
                    row.status = "finished"
                    s.add(row)
        return st

    campaign.ops.open_existing = open_then_finish
    try:
        assert cli("cancel", "c", "--state", tmp_path / "state") == 2
    finally:
        campaign.ops.open_existing = opened
    assert "c is finished; cannot cancel it" in capsys.readouterr().err
    assert _status(store) == "finished"
