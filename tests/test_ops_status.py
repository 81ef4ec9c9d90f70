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
        _cancel_first(st, store, to="finished")
        return st

    campaign.ops.open_existing = open_then_finish
    try:
        assert cli("cancel", "c", "--state", tmp_path / "state") == 2
    finally:
        campaign.ops.open_existing = opened
    assert "c is finished; cannot cancel it" in capsys.readouterr().err
    assert _status(store) == "finished"


def _cancel_first(st: Store, store: Store, to: str = "cancelling") -> None:
    """Just before `st`'s first UPDATE of the campaigns table, another process (through `store`) sets the
    campaign's status to `to`."""
    done: list[bool] = []

    @event.listens_for(st.engine, "before_cursor_execute")
    def first(conn, cursor, statement, params, context, executemany):
        if statement.lstrip().upper().startswith("UPDATE CAMPAIGNS") and not done:
            done.append(True)
            with store.session() as s:
                row = s.get(CampaignRow, "c")
                row.status = to
                s.add(row)


def test_the_daemon_blocking_a_campaign_does_not_undo_a_cancel_made_meanwhile(tmp_path):
    """The daemon's own status moves (blocked by a marketplace's refusal, paused after a pilot, out of
    money after writing the scores so far) are conditional too: a cancel made in between stands."""
    from types import SimpleNamespace

    from campaign.steps.studies import block

    store = _store(tmp_path, "running")
    daemon_store = Store.open(tmp_path / "state")
    _cancel_first(daemon_store, store)
    block(SimpleNamespace(store=daemon_store, name="c"), "the workspace does not exist")  # type: ignore[arg-type]
    assert _status(store) == "cancelling"
    with store.session() as s:
        assert not s.exec(select(EventRow).where(EventRow.kind == "blocked")).all()
    block(SimpleNamespace(store=daemon_store, name="c"), "again")  # type: ignore[arg-type]
    assert _status(store) == "cancelling"


def test_move_status_moves_only_from_the_allowed_statuses(tmp_path):
    from campaign.store import move_status

    store = _store(tmp_path, "finished")
    with store.session() as s:
        assert not move_status(s, "c", "paused", ("running",))
        assert move_status(s, "c", "running", ("finished", "paused"), finished_at=None)
        assert not move_status(s, "nosuch", "paused", ("running",))
    assert _status(store) == "running"
