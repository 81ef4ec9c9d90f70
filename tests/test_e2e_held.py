"""End to end, through `campaign run` in-process with the simulated crowd: one answer whose parse
raises is held, the campaign finishes, `campaign decide` is carried out by the next `campaign run`
(which resumes the finished campaign for it and stops), and the ledger matches the marketplace."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from sqlmodel import select

from campaign.ledger import totals
from campaign.money import assignment_cost
from campaign.store import AssignmentRow, CampaignRow, EventRow, HeldRow, Store
from campaign.tasks import get as get_kind
from tests.support.cli import cli, run_args
from tests.support.specs import campaign, first_propositions, simulated, write_spec


@pytest.mark.slow
def test_a_held_answer_lets_the_run_finish_and_a_decision_is_carried_out_by_the_next_run(tmp_path, monkeypatch, capsys):
    task = {"kind": "likert", "reward": "0.06", "items_per_hit": 5, "assignments": 3, "auto_approval_delay": "2d"}
    config = write_spec(tmp_path / "campaigns.yaml", campaign(
        "heldrun", propositions=first_propositions(tmp_path, 20), task=task, budget="10.00",
        crowd=simulated(8, speed=3600, arrival_span="10m")))
    state = tmp_path / "state"
    kind = get_kind("likert")
    real = type(kind).parse
    calls = {"n": 0}

    def parse(self, stage, fields, items):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("the first answer broke the parser")
        return real(self, stage, fields, items)

    monkeypatch.setattr(type(kind), "parse", parse)
    run = run_args(config, state, "--max-seconds", "200", seed=1)
    assert cli(*run) == 0
    store = Store.open(state)
    try:
        with store.session() as s:
            assert s.get(CampaignRow, "heldrun").status == "finished"
            held = s.exec(select(HeldRow)).one()
            rows = s.exec(select(AssignmentRow)).all()
            t = totals(s, "heldrun", Decimal("10.00"))
            assert len(s.exec(select(EventRow).where(EventRow.kind == "held")).all()) == 1
            assert not s.exec(select(EventRow).where(EventRow.kind == "step_error")).all()
        share = assignment_cost(Decimal("0.06"), 3)
        assert held.step == "collect" and t.reserved == share
        assert sum(r.status == "held" for r in rows) == 1 and len(rows) == 12
        assert all(r.status in ("approved", "rejected") for r in rows if r.assignment_id != held.row_key)
    finally:
        store.close()
    capsys.readouterr()
    assert cli("held", "heldrun", "--json", "--state", str(state)) == 0
    assert [r["row"] for r in json.loads(capsys.readouterr().out)] == [held.row_key]
    assert cli("decide", "heldrun", held.row_key, "approve", "--state", str(state)) == 0
    assert cli(*run) == 0  # resumes the finished campaign for its decision, then stops
    store = Store.open(state)
    try:
        with store.session() as s:
            assert s.get(AssignmentRow, held.row_key).status == "approved"
            assert s.exec(select(HeldRow)).one().status == "settled"
            after = totals(s, "heldrun", Decimal("10.00"))
            assert s.get(CampaignRow, "heldrun").status == "finished"
    finally:
        store.close()
    assert after.reserved == Decimal("0.00") and after.spent == t.spent + share
    from tests.test_e2e import audit  # the marketplace's own record of every assignment and its balance

    facts = audit(state)
    remote = {aid: a["AssignmentStatus"] for aid, (_, a) in facts["remote"].items()}
    assert remote[held.row_key] == "Approved"
    assert {aid: r.status for aid, r in facts["local"].items()} == {aid: st.lower() for aid, st in remote.items()}
    assert Decimal("10000.00") - facts["balance"] == after.spent  # the ledger matches the marketplace to the cent
