"""The repeat step on its own (hand-driven workers on a manual clock) and a simulated Likert campaign
with `repeat: {share: 0.5}` end to end, including a SIGKILL inside the repeat's planning and posting."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import boto3
import pytest
from sqlmodel import select

from campaign.crowd.forms import Form
from campaign.daemon import saved_clock
from campaign.market.server import start_market
from campaign.market.worker_client import WorkerAPIError
from campaign.metrics.reliability import is_repeat, original_key
from campaign.readmodel.retest import stage_retest
from campaign.readmodel.scores import counted_judgments
from campaign.spec import Repeat
from campaign.steps.collect import collect
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending
from campaign.steps.quality_pass import quality_pass
from campaign.steps.repeat import plan_repeat
from campaign.steps.review import close_finished_hits, review
from campaign.steps.stages import stage_done
from campaign.store import AssignmentRow, HitRow, JudgmentRow, LedgerRow, Store
from tests.support.cli import CRASH, clean_env, run_campaign
from tests.support.specs import campaign, first_propositions, simulated, write_spec

BALANCE = Decimal("10000.00")


def _by_slot(bump: int) -> Callable[[Form], list[tuple[str, str]]]:
    """An answer rating the i-th item of the page i + 1, plus one on every `bump`-th item (0: never), so
    items differ and workers nearly agree."""
    return lambda form: [(s.radio_name, str(min(5, s.index + 1 + (bump > 0 and s.index % bump == 0))))
                         for s in form.slots if s.radio_name]


def _settle(h) -> None:
    collect(h.ctx)
    quality_pass(h.ctx)
    review(h.ctx)
    close_finished_hits(h.ctx)


def test_repeat_goes_to_other_workers_after_the_first_pass_and_never_counts(harness):
    h = harness()
    stage = dataclasses.replace(h.ctx.campaign.stages[0], repeat=Repeat(share=0.5))
    h.ctx.campaign = dataclasses.replace(h.ctx.campaign, stages=(stage,))
    load_items(h.ctx)
    plan_stage(h.ctx, stage)
    post_pending(h.ctx)
    first = h.hits()
    assert len(first) == 2
    for hit in first:
        for w in range(3):
            h.work(f"AFIRST{w:08d}", hit.hit_id, _by_slot(0 if w else 2))
    collect(h.ctx)
    assert plan_repeat(h.ctx, stage) == 0, "planned before the first pass was over"
    _settle(h)
    assert all(x.status == "closed" for x in h.hits())
    assert not stage_done(h.ctx, stage.name), "a stage with a repeat still to plan must not count as done"

    assert plan_repeat(h.ctx, stage) == 1  # half of 2 HITs
    assert plan_repeat(h.ctx, stage) == 0  # once
    twins = [x for x in h.hits() if is_repeat(x.hit_key)]
    assert len(twins) == 1 and twins[0].status == "draft"
    orig = next(x for x in first if x.hit_key == original_key(twins[0].hit_key))
    assert twins[0].keys() == orig.keys() and twins[0].reward == orig.reward and twins[0].assignments == orig.assignments
    assert not stage_done(h.ctx, stage.name)

    assert post_pending(h.ctx) == 1
    twin = next(x for x in h.hits() if is_repeat(x.hit_key))
    assert twin.hit_type_id != orig.hit_type_id
    with pytest.raises(WorkerAPIError) as err:
        h.work("AFIRST00000001", twin.hit_id, _by_slot(0))
    assert err.value.code == "DoesNotMeetRequirements"
    for w in range(3):
        h.work(f"AAGAIN{w:08d}", twin.hit_id, _by_slot(0))
    _settle(h)
    assert stage_done(h.ctx, stage.name)

    counted = counted_judgments(h.ctx.store, h.ctx.name, stage.name)
    assert counted and not any(is_repeat(j.hit_key) for j in counted)
    assert {j.worker_id for j in counted} == {f"AFIRST{w:08d}" for w in range(3)}
    with h.ctx.store.session() as s:  # the repeat's work was paid like any other
        twin_work = s.exec(select(AssignmentRow).where(AssignmentRow.hit_key == twin.hit_key)).all()
        charges = {e.assignment_id for e in s.exec(select(LedgerRow).where(LedgerRow.kind == "charge")).all()}
    assert len(twin_work) == 3 and all(a.status == "approved" and a.assignment_id in charges for a in twin_work)

    r = stage_retest(h.ctx.store, h.ctx.name, stage.name)
    assert r is not None and r.items == 5
    assert r.pearson is not None and 0.9 < r.pearson < 1.0  # one first-pass worker of three rated some items higher


def test_a_stage_without_repeat_has_no_retest(harness, rate):
    h = harness()
    load_items(h.ctx)
    plan_stage(h.ctx, h.ctx.campaign.stages[0])
    assert plan_repeat(h.ctx, h.ctx.campaign.stages[0]) == 0
    assert stage_retest(h.ctx.store, h.ctx.name, "likert") is None


def _spec(tmp: Path) -> Path:
    task = {"kind": "likert", "assignments": 5, "traps": {"share": 0.25}, "repeat": {"share": 0.5}}
    return write_spec(tmp / "campaigns.yaml", campaign("rep", task=task, budget="10.00", propositions=first_propositions(tmp, 40),
                                                      crowd=simulated(30, speed=3600, arrival_span="30m")))


def _cli(*args: str, crash: str | None = None) -> subprocess.CompletedProcess:
    return run_campaign(*args, env=clean_env(**({CRASH: crash} if crash else {})), timeout=300)


def _balance_and_remote(state: Path) -> tuple[Decimal, dict[str, dict]]:
    market = start_market(state / "market", clock=saved_clock(state), mode="prod", balance=BALANCE)
    try:
        client = boto3.client("mturk", region_name="us-east-1", endpoint_url=market.endpoint_url,
                              aws_access_key_id=market.credentials.access_key_id,
                              aws_secret_access_key=market.credentials.secret_access_key)
        remote: dict[str, dict] = {}
        for page in client.get_paginator("list_hits").paginate(PaginationConfig={"PageSize": 100}):
            for hit in page["HITs"]:
                remote[hit["RequesterAnnotation"]] = hit
        return Decimal(client.get_account_balance()["AvailableBalance"]), remote
    finally:
        market.stop()


@pytest.mark.slow
@pytest.mark.parametrize("crash", [None, "repeat.after_group:2", "post.after_call:10"])
def test_simulated_likert_campaign_with_repeat_finishes_with_a_plausible_retest(tmp_path, crash):
    cfg, state = _spec(tmp_path), tmp_path / "state"
    run = ["run", "--config", str(cfg), "--state", str(state), "--seed", "3", "--quiet"]
    if crash:
        killed = _cli(*run, crash=crash)
        assert killed.returncode == -9, killed.stderr[-2000:]
    done = _cli(*run)
    assert done.returncode == 0, done.stderr[-2000:]

    status = json.loads(_cli("status", "--state", str(state), "--json").stdout)["campaigns"][0]
    assert status["status"] == "finished"
    retest = status["stages"][0]["repeat"]
    assert retest["items"] >= 15 and retest["pearson"] is not None and retest["pearson"] > 0.5, retest

    balance, remote = _balance_and_remote(state)
    store = Store.open(state)
    with store.session() as s:
        hits = s.exec(select(HitRow)).all()
        work = s.exec(select(AssignmentRow)).all()
        ledger = s.exec(select(LedgerRow)).all()
        judgments = s.exec(select(JudgmentRow)).all()
    store.close()
    twins = [x for x in hits if is_repeat(x.hit_key)]
    assert len(twins) == 4 and len(hits) == 12 and len(remote) == 12, "a HIT was posted twice or lost"
    assert all(x.status == "closed" for x in hits)
    workers: dict[str, set[str]] = {}
    for a in work:
        workers.setdefault(a.hit_key, set()).add(a.worker_id)
    for t in twins:
        assert workers[t.hit_key] and not workers[t.hit_key] & workers[original_key(t.hit_key)]
    charges = [e for e in ledger if e.kind == "charge"]
    assert len(charges) == len({e.assignment_id for e in charges})
    assert BALANCE - balance == sum(Decimal(e.amount) for e in charges), "ledger and marketplace disagree"
    assert {e.assignment_id for e in charges} == {a.assignment_id for a in work if a.status == "approved"}
    assert any(a.hit_key in {t.hit_key for t in twins} for a in work if a.status == "approved")

    # the export counts first-pass labels only
    status_of = {a.assignment_id: (a.status, a.hit_key) for a in work}
    n_first: dict[str, int] = {}
    for j in judgments:
        st, hk = status_of[j.assignment_id]
        if st == "approved" and not j.excluded and not is_repeat(hk) and not j.item_key.startswith("trap:"):
            n_first[j.item_key] = n_first.get(j.item_key, 0) + 1
    rows = [json.loads(line) for line in (state / "rep" / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["item"]: r["n"] for r in rows} == n_first

    report = _cli("report", "rep", "--state", str(state), "--out", str(tmp_path / "r.html"))
    assert report.returncode == 0, report.stderr[-2000:]
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert f"Pearson r = {retest['pearson']:.3f}" in html and f"over {retest['items']} items" in html
