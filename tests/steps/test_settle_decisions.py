"""`campaign held` and `campaign decide`, carried out by the daemon's `decisions` step: each decision's
effect on the ledger to the cent and on the marketplace, and a replayed decision that changes nothing."""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal

import pytest
from sqlmodel import select

from campaign.daemon import _ended, tick
from campaign.ledger import totals
from campaign.money import assignment_cost
from campaign.quality.review import Decision, ReviewResult
from campaign.steps.quality_pass import pay_bonuses
from campaign.store import AssignmentRow, CampaignRow, EventRow, HeldRow, HitRow, JudgmentRow, LedgerRow
from campaign.tasks import get as get_kind
from tests.support.cli import cli

BUDGET = Decimal("10.00")
pytestmark = pytest.mark.slow  # each test runs a small campaign to its end (1-4 s)


class Boom(RuntimeError):
    pass


def _strict(text: str):
    def no_constant(name: str):
        raise ValueError(f"not strict JSON: {name}")
    return json.loads(text, parse_constant=no_constant)


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli(*argv)
    out, err = capsys.readouterr()
    return code, out, err


def _status(h) -> str:
    with h.ctx.store.session() as s:
        return s.get(CampaignRow, h.ctx.name).status


def _totals(h):
    with h.ctx.store.session() as s:
        return totals(s, h.ctx.name, BUDGET)


def _ledger(h) -> list[tuple[str, str, str]]:
    with h.ctx.store.session() as s:
        return sorted((r.ref, r.kind, r.amount) for r in s.exec(select(LedgerRow).where(LedgerRow.campaign == h.ctx.name)).all())


def _finish(h, rate, poison_answer: bool) -> str:
    """Run the Likert campaign to its end with one row held; returns that assignment's id. With
    `poison_answer` its answer's parse raises (held by collect, no labels); otherwise approving it
    raises (held by review, labels stored)."""
    bad: list[str] = []
    tick(h.ctx)
    for hit in sorted(h.hits(), key=lambda x: x.hit_key):
        for w in range(3):
            first = not bad
            answer = (lambda form: rate(2)(form) + [("poison", "1")]) if first and poison_answer else rate(2 + w)
            aid = h.work(f"AWORKER{w:07d}", hit.hit_id, answer)
            bad[:] = bad or [aid]
    h.tick_until_finished()
    assert _status(h) == "finished"
    return bad[0]


@pytest.fixture
def poisoned_parse(monkeypatch):
    kind = get_kind("likert")
    real = type(kind).parse

    def parse(self, stage, fields, items):
        if ("poison", "1") in fields:
            raise Boom("this answer broke the parser")
        return real(self, stage, fields, items)

    monkeypatch.setattr(type(kind), "parse", parse)


def _share(h) -> Decimal:
    hit = h.hits()[0]
    return assignment_cost(Decimal(hit.reward), hit.assignments)


def test_held_lists_the_row_with_its_reason_everywhere(harness, rate, poisoned_parse, capsys, tmp_path):
    h = harness()
    bad = _finish(h, rate, poison_answer=True)
    state = str(tmp_path / "state")
    code, out, _ = _cli(capsys, "held", "steps", "--json", "--state", state)
    rows = _strict(out)
    assert code == 0 and [(r["row"], r["kind"], r["step"], r["status"], r["decision"]) for r in rows] == \
        [(bad, "assignment", "collect", "held", None)]
    assert "Boom: this answer broke the parser" in rows[0]["reason"] and rows[0]["worker"] == "AWORKER0000000"
    code, out, _ = _cli(capsys, "held", "--state", state)  # every campaign, as a table
    assert code == 0 and bad in out and "collect" in out
    code, out, _ = _cli(capsys, "status", "--json", "--state", state)
    figures = _strict(out)["campaigns"][0]
    assert figures["held"]["open"] == 1 and figures["held"]["rows"][0]["row"] == bad
    code, out, _ = _cli(capsys, "status", "--state", state)
    assert "held for the operator" in out
    code, out, _ = _cli(capsys, "workers", "steps", "--json", "--state", state)
    assert {w["worker"]: w["held"] for w in _strict(out)} == {"AWORKER0000000": 1, "AWORKER0000001": 0, "AWORKER0000002": 0}
    from campaign.readmodel.snapshot import Reader
    from campaign.report import build_report

    assert Reader(h.ctx.store).campaign("steps", now=h.clock.now()).held == 1
    assert bad in build_report(h.ctx.store, "steps") and "Held for the operator" in build_report(h.ctx.store, "steps")
    assert _cli(capsys, "held", "nosuch", "--state", state)[0] == 2


def test_approve_charges_the_held_share_and_approves_on_the_marketplace_and_a_replay_changes_nothing(
        harness, rate, poisoned_parse, capsys, tmp_path):
    h = harness()
    bad = _finish(h, rate, poison_answer=True)
    share, before = _share(h), _totals(h)
    assert before.reserved == share
    state = str(tmp_path / "state")
    code, out, _ = _cli(capsys, "decide", "steps", bad, "approve", "--state", state)
    assert code == 0 and "approve recorded" in out
    assert _totals(h) == before and not _ended(h.ctx.store, "steps")  # an intent: `campaign run` resumes for it
    assert _strict(_cli(capsys, "held", "steps", "--json", "--state", state)[1])[0]["decision"] == "approve"
    tick(h.ctx)  # the finished campaign's pass: only its decisions
    after = _totals(h)
    assert after.spent == before.spent + share and after.reserved == Decimal("0.00") and _ended(h.ctx.store, "steps")
    assert h.ctx.market.get_assignment(bad).status == "approved"
    with h.ctx.store.session() as s:
        held = s.exec(select(HeldRow)).one()
        assert held.status == "settled" and held.outcome == "approved on the marketplace"
        assert s.get(AssignmentRow, bad).status == "approved"
    ledger, n_events = _ledger(h), _count_events(h)
    code, out, _ = _cli(capsys, "decide", "steps", bad, "approve", "--state", state)  # replayed: nothing changes
    assert code == 0 and "nothing changed" in out
    tick(h.ctx)
    assert _ledger(h) == ledger and _count_events(h) == n_events and _totals(h) == after
    code, _, err = _cli(capsys, "decide", "steps", bad, "reject", "--state", state)  # another decision: refused
    assert code == 2 and "already decided" in err and _ledger(h) == ledger
    assert _strict(_cli(capsys, "held", "steps", "--json", "--state", state)[1]) == []
    assert _strict(_cli(capsys, "held", "steps", "--all", "--json", "--state", state)[1])[0]["status"] == "settled"


def _count_events(h) -> int:
    with h.ctx.store.session() as s:
        return len(s.exec(select(EventRow).where(EventRow.campaign == h.ctx.name)).all())


def test_reject_releases_the_held_share_and_rejects_with_the_message(harness, rate, poisoned_parse, capsys, tmp_path):
    h = harness()
    bad = _finish(h, rate, poison_answer=True)
    share, before = _share(h), _totals(h)
    code, _, _ = _cli(capsys, "decide", "steps", bad, "reject", "--message", "Empty answer.\x1b[31m", "--state", str(tmp_path / "state"))
    assert code == 0
    tick(h.ctx)
    tick(h.ctx)
    after = _totals(h)
    assert after.spent == before.spent and after.reserved == before.reserved - share == Decimal("0.00")
    remote = h.ctx.market.get_assignment(bad)
    assert remote.status == "rejected"
    with h.ctx.store.session() as s:
        assert s.get(AssignmentRow, bad).feedback == "Empty answer.[31m"  # control characters never reach the worker
        assert s.exec(select(LedgerRow).where(LedgerRow.ref == f"release:{bad}")).one().amount == str(share)


def test_drop_pays_the_worker_and_leaves_the_answer_out(harness, rate, monkeypatch, capsys, tmp_path):
    h = harness()
    held_aid: list[str] = []
    real = h.ctx.market.approve

    def approve(aid, feedback=None):
        if not held_aid:
            held_aid.append(aid)
        if aid == held_aid[0]:
            raise Boom("the adapter broke on this one")
        return real(aid, feedback)

    monkeypatch.setattr(h.ctx.market, "approve", approve)
    bad = _finish(h, rate, poison_answer=False)
    bad = held_aid[0]
    with h.ctx.store.session() as s:
        assert s.exec(select(JudgmentRow).where(JudgmentRow.assignment_id == bad)).all()  # its labels were stored
    monkeypatch.setattr(h.ctx.market, "approve", real)  # the operator fixed the adapter
    share, before = _share(h), _totals(h)
    assert _cli(capsys, "decide", "steps", bad, "drop", "--state", str(tmp_path / "state"))[0] == 0
    tick(h.ctx)
    after = _totals(h)
    assert after.spent == before.spent + share and after.reserved == Decimal("0.00")
    assert h.ctx.market.get_assignment(bad).status == "approved"
    with h.ctx.store.session() as s:
        row = s.get(AssignmentRow, bad)
        assert row.status == "approved" and not row.valid and row.error.startswith("dropped by the operator")
        assert not s.exec(select(JudgmentRow).where(JudgmentRow.assignment_id == bad)).all()


def test_a_held_hit_is_dropped_with_its_reservation_released_and_cannot_be_posted_once_finished(
        harness, rate, monkeypatch, capsys, tmp_path):
    h = harness()
    real = h.ctx.market.create_hit
    first: list[str] = []

    def create_hit(type_id, request):
        first[:] = first or [request.annotation]
        if request.annotation == first[0]:
            raise Boom("rendering broke")
        return real(type_id, request)

    monkeypatch.setattr(h.ctx.market, "create_hit", create_hit)
    _finish_posted(h, rate)
    held = next(x for x in h.hits() if x.status == "held")
    state = str(tmp_path / "state")
    before = _totals(h)
    assert before.reserved == Decimal(held.reserved)
    code, _, err = _cli(capsys, "decide", "steps", held.hit_key, "approve", "--state", state)
    assert code == 2 and "can no longer be posted" in err
    assert _cli(capsys, "decide", "steps", f"hit:{held.hit_key}", "drop", "--state", state)[0] == 0
    tick(h.ctx)
    after = _totals(h)
    assert after.reserved == Decimal("0.00") and after.spent == before.spent
    with h.ctx.store.session() as s:
        assert s.get(HitRow, held.id).status == "failed"


def _finish_posted(h, rate) -> None:
    tick(h.ctx)
    for hit in h.hits():
        if hit.hit_id is not None:
            for w in range(3):
                h.work(f"AWORKER{w:07d}", hit.hit_id, rate(2 + w))
    for _ in range(40):
        tick(h.ctx)
        if _status(h) == "finished":
            return
        h.clock.advance(60)
    raise AssertionError("the campaign did not finish")


@pytest.mark.parametrize(("where", "decision"), [("call", "approve"), ("before-call", "approve"), ("before-call", "reject"),
                                                 ("before-call", "drop"), ("call", "reject")])
def test_a_held_bonus_is_paid_or_released(harness, rate, monkeypatch, capsys, tmp_path, where, decision):
    """Held before its call, a bonus may be paid or released; held by its call (it may have been paid),
    only `approve` is carried out (the token makes the second call pay nothing twice)."""
    h = harness()
    _finish_posted(h, rate)
    h.ctx.campaign = dataclasses.replace(h.ctx.campaign, quality=dataclasses.replace(h.ctx.campaign.quality, bonus="0.10"))
    import campaign.steps.quality_pass as qp

    if where == "call":
        real = h.ctx.market.bonus

        def bonus(worker, *args):
            if worker == "AWORKER0000001":
                raise Boom("the adapter broke on this bonus")
            return real(worker, *args)
        monkeypatch.setattr(h.ctx.market, "bonus", bonus)
    else:
        real_token = qp.bonus_token

        def token(ctx, worker):
            if worker == "AWORKER0000001":
                raise Boom("the token broke")
            return real_token(ctx, worker)
        monkeypatch.setattr(qp, "bonus_token", token)
    pay_bonuses(h.ctx, ReviewResult(evidence={}, decisions=[Decision("bonus", f"AWORKER{w:07d}", "careful", {}) for w in range(3)]))
    before = _totals(h)
    each = Decimal("0.12")  # the bonus and its 20% fee, reserved
    assert before.reserved == each
    monkeypatch.undo()
    assert _cli(capsys, "decide", "steps", "bonus:AWORKER0000001", decision, "--state", str(tmp_path / "state"))[0] == 0
    tick(h.ctx)
    after = _totals(h)
    if where == "call" and decision != "approve":  # refused: still held, still reserved, the decision withdrawn
        assert after == before and h.ctx.store.get_kv(h.ctx.name, "bonus:AWORKER0000001") == "held"
        with h.ctx.store.session() as s:
            row = s.exec(select(HeldRow)).one()
            assert row.status == "held" and row.decision is None and "may have been sent" in row.outcome
        return
    assert after.reserved == Decimal("0.00")
    assert after.spent == before.spent + (each if decision == "approve" else 0)
    assert h.ctx.store.get_kv(h.ctx.name, "bonus:AWORKER0000001") == "paid"


def test_decide_refuses_what_it_cannot_name(harness, rate, poisoned_parse, capsys, tmp_path):
    h = harness()
    _finish(h, rate, poison_answer=True)
    state = str(tmp_path / "state")
    ledger = _ledger(h)
    code, _, err = _cli(capsys, "decide", "steps", "NOSUCHROW", "approve", "--state", state)
    assert code == 2 and "holds no row" in err
    assert _cli(capsys, "decide", "nosuch", "X", "approve", "--state", state)[0] == 2
    with pytest.raises(SystemExit) as exc:
        cli("decide", "steps", "X", "pay-twice", "--state", state)
    assert exc.value.code == 2
    code, _, err = _cli(capsys, "decide", "steps", "X", "approve", "--message", "x" * 2000, "--state", state)
    assert code == 2 and "at most 1024" in err
    assert _ledger(h) == ledger


def test_a_decision_that_fails_is_withdrawn_once_and_can_be_made_again(harness, rate, poisoned_parse, monkeypatch, capsys, tmp_path):
    h = harness()
    bad = _finish(h, rate, poison_answer=True)
    state = str(tmp_path / "state")
    ledger = _ledger(h)
    real = h.ctx.market.approve

    def approve(aid, feedback=None):
        raise Boom("the adapter broke again")

    monkeypatch.setattr(h.ctx.market, "approve", approve)
    assert _cli(capsys, "decide", "steps", bad, "approve", "--state", state)[0] == 0
    for _ in range(3):
        tick(h.ctx)
    with h.ctx.store.session() as s:
        held = s.exec(select(HeldRow)).one()
        assert held.status == "held" and held.decision is None and "Boom" in held.outcome
        assert s.get(AssignmentRow, bad).status == "held"  # the intent was undone: review leaves it alone
        assert len(s.exec(select(EventRow).where(EventRow.kind == "held_decision_failed")).all()) == 1
    assert _ledger(h) == ledger and _ended(h.ctx.store, "steps")
    monkeypatch.setattr(h.ctx.market, "approve", real)
    assert _cli(capsys, "decide", "steps", bad, "approve", "--state", state)[0] == 0  # decided again
    tick(h.ctx)
    assert h.ctx.market.get_assignment(bad).status == "approved" and _totals(h).reserved == Decimal("0.00")


def test_two_decisions_at_once_do_not_both_win(harness, rate, poisoned_parse, monkeypatch, capsys, tmp_path):
    """`decide ... approve` and `decide ... reject` racing: each read the row undecided and the later one
    silently replaced the other's decision (which the daemon may already be carrying out). The decision
    is written only if the row is still undecided; the loser is told."""
    import campaign.held_cli

    h = harness()
    bad = _finish(h, rate, poison_answer=True)
    state = str(tmp_path / "state")
    checked = campaign.held_cli._refused_for

    def meanwhile(row, decision):  # the other `decide` commits between this one's read and its write
        with h.ctx.store.session() as s:
            other = s.get(HeldRow, row.id)
            other.decision = "reject"
            s.add(other)
        return checked(row, decision)

    monkeypatch.setattr(campaign.held_cli, "_refused_for", meanwhile)
    code, _, err = _cli(capsys, "decide", "steps", bad, "approve", "--state", state)
    assert code == 2 and "was decided meanwhile" in err
    with h.ctx.store.session() as s:
        assert s.exec(select(HeldRow)).one().decision == "reject"
        assert not s.exec(select(EventRow).where(EventRow.kind == "decide")).all()
