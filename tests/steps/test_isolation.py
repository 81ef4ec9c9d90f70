"""Invariant 8: no single answer, HIT or bonus can stop a pass.

Each test runs the daemon's whole pass (`campaign.daemon.tick`) in-process against the built-in
marketplace on a manual clock, with workers driven by hand, and injects a failure into one step for
one row (a task kind's parse, the marketplace adapter's approve, posting one HIT, sending one bonus) or
into a whole step: the pass goes on, the other rows are processed, the campaign finishes, and the
failure is recorded by exactly one event.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from sqlmodel import select

from campaign.daemon import tick
from campaign.ledger import totals
from campaign.money import assignment_cost
from campaign.quality.review import Decision, ReviewResult
from campaign.steps import pipeline
from campaign.steps.isolation import BACKOFF_MAX, StepGuard
from campaign.steps.quality_pass import pay_bonuses
from campaign.store import AssignmentRow, CampaignRow, EventRow, HeldRow, HitRow
from campaign.tasks import get as get_kind


class Boom(RuntimeError):
    """The injected failure: not a marketplace error, not an invalid answer."""


def _status(h) -> str:
    with h.ctx.store.session() as s:
        row = s.get(CampaignRow, h.ctx.name)
        return row.status if row else "missing"


def _events(h, kind: str) -> list[EventRow]:
    with h.ctx.store.session() as s:
        return list(s.exec(select(EventRow).where(EventRow.campaign == h.ctx.name, EventRow.kind == kind)).all())


def _held(h) -> list[HeldRow]:
    with h.ctx.store.session() as s:
        return list(s.exec(select(HeldRow).where(HeldRow.campaign == h.ctx.name)).all())


def _assignments(h) -> dict[str, AssignmentRow]:
    with h.ctx.store.session() as s:
        return {a.assignment_id: a for a in s.exec(select(AssignmentRow).where(AssignmentRow.campaign == h.ctx.name)).all()}


def run_campaign(h, rate, passes: int = 40, workers: int = 3, warm_up: int = 1) -> list[str]:
    """Plan and post (`warm_up` passes), have `workers` workers answer every posted HIT, then pass until
    the campaign finishes; returns the assignment ids in the order they were submitted."""
    for _ in range(warm_up):
        tick(h.ctx)  # load, plan, post
    aids = []
    for hit in sorted(h.hits(), key=lambda x: x.hit_key):
        if hit.hit_id is None:
            continue
        for w in range(workers):
            aids.append(h.work(f"AWORKER{w:07d}", hit.hit_id, rate(2 + w)))
    h.tick_until_finished(passes)
    return aids


def _fails_for(target: Callable[[], str | None], real: Callable[..., Any], key: Callable[..., str | None]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if key(*args, **kwargs) == target():
            raise Boom("injected for one row")
        return real(*args, **kwargs)
    return wrapped


def test_an_answer_whose_parse_raises_is_held_once_and_the_campaign_finishes(harness, rate, monkeypatch):
    h = harness()
    kind = get_kind("likert")
    bad: list[str] = []
    real = type(kind).parse

    def parse(self, stage, fields, items):
        if ("poison", "1") in fields:
            raise Boom("parse failed for this one answer")
        return real(self, stage, fields, items)

    monkeypatch.setattr(type(kind), "parse", parse)
    tick(h.ctx)
    hits = sorted(h.hits(), key=lambda x: x.hit_key)
    for hit in hits:
        for w in range(3):
            poisoned = not bad
            aid = h.work(f"AWORKER{w:07d}", hit.hit_id, (lambda form: rate(2)(form) + [("poison", "1")]) if poisoned else rate(2 + w))
            bad[:] = bad or [aid]
    h.tick_until_finished()
    assert _status(h) == "finished"
    rows = _assignments(h)
    assert rows[bad[0]].status == "held" and not rows[bad[0]].valid and "Boom" in (rows[bad[0]].error or "")
    assert sorted(a.status for k, a in rows.items() if k != bad[0]) == ["approved"] * 5  # the others went on
    held = _held(h)
    assert [(r.row_kind, r.row_key, r.step, r.status) for r in held] == [("assignment", bad[0], "collect", "held")]
    assert len(_events(h, "held")) == 1 and not _events(h, "step_error")
    # its HIT closed; the held answer's share stays reserved (to the cent), the rest was released
    with h.ctx.store.session() as s:
        assert {x.status for x in s.exec(select(HitRow).where(HitRow.campaign == h.ctx.name)).all()} == {"closed"}
        t = totals(s, h.ctx.name, Decimal("10.00"))
    share = assignment_cost(Decimal(hits[0].reward), hits[0].assignments)
    assert t.reserved == share and t.spent == 5 * share
    assert h.ctx.market.get_assignment(bad[0]).status == "submitted"  # nothing decided on the marketplace


@pytest.mark.slow
def test_an_approval_that_raises_holds_that_assignment_only(harness, rate, monkeypatch):
    h = harness()
    bad: list[str] = []
    real = h.ctx.market.approve
    monkeypatch.setattr(h.ctx.market, "approve", _fails_for(lambda: bad[0] if bad else None, real, lambda aid, *a, **k: aid))
    tick(h.ctx)
    for hit in sorted(h.hits(), key=lambda x: x.hit_key):
        for w in range(3):
            aid = h.work(f"AWORKER{w:07d}", hit.hit_id, rate(2 + w))
            bad[:] = bad or [aid]
    h.tick_until_finished()
    assert _status(h) == "finished"
    rows = _assignments(h)
    assert rows[bad[0]].status == "held"
    assert sorted(a.status for k, a in rows.items() if k != bad[0]) == ["approved"] * 5
    assert [(r.row_key, r.step) for r in _held(h)] == [(bad[0], "review")]
    assert len(_events(h, "held")) == 1 and not _events(h, "step_error")


@pytest.mark.slow
def test_a_hit_whose_posting_raises_is_held_with_its_reservation_and_the_others_go_up(harness, rate, monkeypatch):
    h = harness()
    tick_plan = pipeline.steps_for("running")
    assert any(s.name == "post" for s in tick_plan)
    real = h.ctx.market.create_hit
    first: list[str] = []

    def create_hit(type_id, request):
        if not first:
            first.append(request.annotation)
        if request.annotation == first[0]:
            raise Boom("rendering this HIT failed")
        return real(type_id, request)

    monkeypatch.setattr(h.ctx.market, "create_hit", create_hit)
    run_campaign(h, rate)
    assert _status(h) == "finished"
    hits = {x.hit_key: x for x in h.hits()}
    held = [x for x in hits.values() if x.status == "held"]
    assert len(held) == 1 and held[0].annotation == first[0]
    assert {x.status for x in hits.values() if x is not held[0]} == {"closed"}
    assert sorted(a.status for a in _assignments(h).values()) == ["approved"] * 3 * (len(hits) - 1)
    assert [(r.row_kind, r.row_key, r.step) for r in _held(h)] == [("hit", held[0].hit_key, "post")]
    assert len(_events(h, "held")) == 1
    with h.ctx.store.session() as s:
        t = totals(s, h.ctx.name, Decimal("10.00"))
    assert t.reserved == Decimal(held[0].reserved) > 0  # its reservation stays until the operator settles it


@pytest.mark.slow
def test_a_bonus_that_raises_is_held_reserved_and_the_others_are_paid(harness, rate, monkeypatch):
    h = harness()
    run_campaign(h, rate)
    assert _status(h) == "finished"
    h.ctx.campaign = dataclasses.replace(h.ctx.campaign, quality=dataclasses.replace(h.ctx.campaign.quality, bonus="0.10"))
    real = h.ctx.market.bonus
    monkeypatch.setattr(h.ctx.market, "bonus", _fails_for(lambda: "AWORKER0000001", real, lambda w, *a, **k: w))
    result = ReviewResult(evidence={}, decisions=[Decision("bonus", f"AWORKER{w:07d}", "careful", {}) for w in range(3)])
    before = _totals(h)
    pay_bonuses(h.ctx, result)
    pay_bonuses(h.ctx, result)  # again: the held one is left alone, the paid ones are not paid twice
    kv = {w: h.ctx.store.get_kv(h.ctx.name, f"bonus:AWORKER{w:07d}") for w in range(3)}
    assert kv == {0: "paid", 1: "held", 2: "paid"}
    after = _totals(h)
    each = Decimal("0.12")  # 0.10 + the 20% bonus fee
    assert after.spent - before.spent == 2 * each and after.reserved - before.reserved == each
    assert [(r.row_kind, r.row_key, r.step) for r in _held(h)] == [("bonus", "bonus:AWORKER0000001", "bonuses")]
    assert len(_events(h, "held")) == 1


def _totals(h):
    with h.ctx.store.session() as s:
        return totals(s, h.ctx.name, Decimal("10.00"))


# every step a running Likert campaign runs (the cancelling-only steps and batch planning run the same
# guard, `pipeline.Step.__call__`, but not in this campaign)
STEP_NAMES = sorted(s.name for s in pipeline.PIPELINE if "running" in s.statuses and s.batch_planned is not True)


@pytest.mark.slow
@pytest.mark.parametrize("name", STEP_NAMES)
def test_each_step_failing_for_a_while_costs_one_event_and_the_campaign_finishes(harness, rate, monkeypatch, name):
    """Every step of the pipeline raises on its first few runs: the rest of each pass runs, the step
    backs off, one step_error (and one step_recovered) is written, and the campaign still finishes."""
    h = harness()
    failures = {"left": 3}
    steps = []
    for step in pipeline.PIPELINE:
        if step.name != name:
            steps.append(step)
            continue

        def failing(fn):
            def run(*args):
                if failures["left"] > 0:
                    failures["left"] -= 1
                    raise Boom(f"step {name} broke")
                return fn(*args)
            return run
        steps.append(pipeline.Step(step.name, step.statuses,
                                   run=failing(step.run) if step.run else None,
                                   run_stage=failing(step.run_stage) if step.run_stage else None,
                                   batch_planned=step.batch_planned))
    monkeypatch.setattr(pipeline, "PIPELINE", tuple(steps))
    run_campaign(h, rate, passes=60, warm_up=12)  # a step failing 3 times in a row runs again at pass 8
    assert _status(h) == "finished"
    assert sorted(a.status for a in _assignments(h).values()) == ["approved"] * 6
    errors = _events(h, "step_error")
    assert failures["left"] == 0
    assert len(errors) == 1 and name in errors[0].message
    assert len(_events(h, "step_recovered")) == 1
    assert not _held(h)


def test_a_step_that_keeps_failing_backs_off_exponentially_and_writes_one_event(harness):
    h = harness()
    tried: list[int] = []
    guard = StepGuard(h.ctx)
    for n in range(1, 301):
        StepGuard.next_pass(h.ctx)

        def fail(n=n):
            tried.append(n)
            raise Boom("always")
        assert guard.run("broken", fail) is False
    gaps = [b - a for a, b in zip(tried, tried[1:], strict=False)]
    assert gaps[:7] == [1, 2, 4, 8, 16, 32, 64] and set(gaps[6:]) == {BACKOFF_MAX}
    assert len(_events(h, "step_error")) == 1
    StepGuard.next_pass(h.ctx)
    for _ in range(BACKOFF_MAX):
        StepGuard.next_pass(h.ctx)
    assert guard.run("broken", lambda: None) is True
    assert len(_events(h, "step_recovered")) == 1 and len(_events(h, "step_error")) == 1
    # another kind of error starts a new event; the same again does not
    for exc in (KeyError("x"), KeyError("x"), ValueError("y")):
        for _ in range(BACKOFF_MAX + 1):
            StepGuard.next_pass(h.ctx)

        def fail(exc: Exception = exc) -> None:
            raise exc
        guard.run("broken", fail)
    assert [e.message.split(":")[1].strip() for e in _events(h, "step_error")] == ["Boom", "KeyError", "ValueError"]


@pytest.mark.slow
def test_the_rest_of_the_pass_runs_when_a_step_raises(harness, rate, monkeypatch):
    """Without isolation one raising collect stopped every later step of every pass."""
    h = harness()
    tick(h.ctx)
    for hit in h.hits():
        for w in range(3):
            h.work(f"AWORKER{w:07d}", hit.hit_id, rate(3))
    def broken(ctx):
        raise Boom("quality control broke")
    patched = tuple(pipeline.Step(s.name, s.statuses, run=broken if s.name == "quality" else s.run,
                                  run_stage=s.run_stage, batch_planned=s.batch_planned) for s in pipeline.PIPELINE)
    ran = pipeline.run_pass(h.ctx, "running", pipeline=patched)
    assert ran[-1] == "alerts" and "review" in ran
    assert sorted(a.status for a in _assignments(h).values()) == ["approved"] * 6  # review ran after it
    assert len(_events(h, "step_error")) == 1


@pytest.mark.slow
def test_a_control_character_in_an_answer_no_longer_stalls_the_campaign(harness, rate):
    """The issue's finding: a Likert value `4\\x00` made the answer XML unreadable (a ParseError, which
    collect did not catch), and every later pass died at collect. The task site now refuses such a value
    at the door, so the unreadable answer is put into the marketplace's store directly, as a release that
    let it through left it there; it is rejected as invalid (total parsers) or held, and either way the
    other answers are approved and the campaign finishes."""
    h = harness()
    tick(h.ctx)
    bad = None
    for hit in sorted(h.hits(), key=lambda x: x.hit_key):
        for w in range(3):
            aid = h.work(f"AWORKER{w:07d}", hit.hit_id, rate(2 + w))
            bad = bad or aid
    with h.market.db.transaction() as conn:  # type: ignore[attr-defined]
        n = conn.execute("UPDATE assignments SET answer = replace(answer, '>2<', '>4' || char(0) || '<') WHERE id = ?",
                         (bad,)).rowcount
        stored = conn.execute("SELECT instr(answer, char(0)) FROM assignments WHERE id = ?", (bad,)).fetchone()[0]
    assert n == 1 and stored > 0
    h.tick_until_finished()
    assert _status(h) == "finished"
    rows = _assignments(h)
    assert rows[bad].status in ("held", "rejected")
    assert sorted(a.status for k, a in rows.items() if k != bad) == ["approved"] * 5
    assert not _events(h, "step_error")
    assert len(_events(h, "held")) == (1 if rows[bad].status == "held" else 0)
