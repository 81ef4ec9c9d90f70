"""End to end: the daemon against the built-in marketplace and the simulated crowd, including SIGKILL
at chosen points of a run, then a restart, then an audit of the store against the marketplace.
"""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import time
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from sqlmodel import select

from campaign.answer_xml import parse_answer_xml
from campaign.daemon import saved_clock
from campaign.market.server import start_market
from campaign.quality.evidence import Label, TrapResult
from campaign.quality.review import PolicyConfig, review
from campaign.store import AssignmentRow, HitRow, LedgerRow, Store, WorkerRow
from campaign.tasks import likert
from tests.support.cli import clean_env, kill_at, run_args, run_campaign
from tests.support.paths import ROOT
from tests.support.specs import NO_CROWD, campaign, simulated
from tests.support.specs import write_spec as spec_file

BALANCE = Decimal("10000.00")
TRAP_TEXTS = ["This sentence is not important.", "Barack Obama graduated from Harvard Law."]
CROWD = simulated(25, speed=3600, arrival_span="30m")


def e2e_campaign(budget: str = "30.00", **over: Any) -> dict[str, Any]:
    """The demo's Likert campaign, a quarter of its HITs with a check sentence, 25 simulated workers."""
    task = {"kind": "likert", "reward": "0.06", "auto_approval_delay": "2d", "traps": {"share": 0.25, "texts": TRAP_TEXTS}}
    return campaign("e2e", task=task, budget=budget, crowd=CROWD) | over


def write_spec(tmp: Path, budget: str = "30.00") -> Path:
    return spec_file(tmp / "campaigns.yaml", e2e_campaign(budget))


def run_cli(config: Path, state: Path, seed: int = 3, env_extra: dict | None = None, timeout: float = 240,
            db: str | None = None, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return run_campaign(*run_args(config, state, *(["--db", db] if db else []), *extra, seed=seed),
                        env=clean_env(**(env_extra or {})), timeout=timeout)


def audit(state: Path, db: str | None = None) -> dict:
    """Compare the store with what the marketplace holds; return the facts the tests assert on."""
    market = start_market(state / "market", clock=saved_clock(state), mode="prod", balance=BALANCE)
    try:
        client = boto3.client("mturk", region_name="us-east-1", endpoint_url=market.endpoint_url,
                              aws_access_key_id=market.credentials.access_key_id,
                              aws_secret_access_key=market.credentials.secret_access_key)
        hits = []
        for page in client.get_paginator("list_hits").paginate(PaginationConfig={"PageSize": 100}):
            hits.extend(page["HITs"])
        remote_assignments = {}
        for h in hits:
            for page in client.get_paginator("list_assignments_for_hit").paginate(
                    HITId=h["HITId"], AssignmentStatuses=["Submitted", "Approved", "Rejected"], PaginationConfig={"PageSize": 100}):
                for a in page["Assignments"]:
                    remote_assignments[a["AssignmentId"]] = (h, a)
        balance = Decimal(client.get_account_balance()["AvailableBalance"])
    finally:
        market.stop()
    store = Store.open(state, db)
    with store.session() as s:
        local_hits = s.exec(select(HitRow)).all()
        local_assignments = {a.assignment_id: a for a in s.exec(select(AssignmentRow)).all()}
        ledger = s.exec(select(LedgerRow)).all()
        excluded = {w.worker_id for w in s.exec(select(WorkerRow).where(WorkerRow.excluded == True)).all()}  # noqa: E712
    store.close()
    return {"hits": hits, "remote": remote_assignments, "balance": balance, "local_hits": local_hits,
            "local": local_assignments, "ledger": ledger, "excluded": excluded}


def recompute_scores(facts: dict) -> list[dict]:
    """Scores from the marketplace's answers alone, with the quality policy re-run on them."""
    keys_by_annotation = {h.annotation: h.keys() for h in facts["local_hits"]}
    labels, traps, approved = [], [], set()
    for hit, a in facts["remote"].values():
        if a["AssignmentStatus"] == "Approved":
            approved.add(a["AssignmentId"])
        for j in likert.parse(parse_answer_xml(a["Answer"]), keys_by_annotation[hit["RequesterAnnotation"]]):
            if j.item_key.startswith("trap:"):
                traps.append(TrapResult(a["WorkerId"], a["AssignmentId"], j.item_key, j.value, j.value <= 2))
            else:
                labels.append(Label(item=j.item_key, worker=a["WorkerId"], assignment=a["AssignmentId"], value=j.value))
    excluded = review(labels, traps, PolicyConfig()).excluded
    assert excluded == facts["excluded"], "the store's exclusions differ from the policy applied to the marketplace's answers"
    values = defaultdict(list)
    for lab in labels:
        if lab.worker not in excluded and lab.assignment in approved:
            values[lab.item].append(lab.value)
    return likert.aggregate(values)


def check_consistent(state: Path, db: str | None = None) -> dict:
    facts = audit(state, db)
    annotations = [h["RequesterAnnotation"] for h in facts["hits"]]
    assert len(annotations) == len(set(annotations)), "a HIT was posted twice"
    assert len(facts["hits"]) == len(facts["local_hits"]) == len({h.hit_id for h in facts["local_hits"]})
    assert set(facts["remote"]) == set(facts["local"]), "an assignment was lost (or invented)"
    for aid, (_, a) in facts["remote"].items():
        assert facts["local"][aid].status == a["AssignmentStatus"].lower()
    charges = [e for e in facts["ledger"] if e.kind == "charge"]
    assert len(charges) == len({e.assignment_id for e in charges}), "an approval was booked twice"
    approved = [aid for aid, (_, a) in facts["remote"].items() if a["AssignmentStatus"] == "Approved"]
    assert sorted(e.assignment_id for e in charges) == sorted(approved)
    spent = sum(Decimal(e.amount) for e in charges)
    assert BALANCE - facts["balance"] == spent, "ledger and marketplace disagree"
    reserved = sum(Decimal(e.amount) * (1 if e.kind == "reserve" else -1) for e in facts["ledger"] if e.kind in ("reserve", "charge", "release"))
    assert reserved == 0, "money still reserved after the campaign finished"
    with open(state / "e2e" / "scores.jsonl", encoding="utf-8") as fh:
        written = [json.loads(line) for line in fh]
    expected = recompute_scores(facts)
    assert [(r["item"], r["score"], r["n"]) for r in written] == [(r["item"], r["score"], r["n"]) for r in expected]
    return facts


@pytest.mark.slow
def test_demo_campaign_runs_to_completion_and_matches_the_marketplace(tmp_path):
    config = write_spec(tmp_path)
    t0 = time.monotonic()
    proc = run_cli(config, tmp_path / "state")
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = check_consistent(tmp_path / "state")
    assert len(facts["hits"]) == 12
    assert sum("trap:" in h.item_keys for h in facts["local_hits"]) == 3  # a quarter of the HITs carry a trap
    rows = list(csv.DictReader(open(tmp_path / "state" / "e2e" / "scores.csv", encoding="utf-8")))
    assert len(rows) == 60 and rows[0]["rank"] == "1"
    assert not any(r["item"].startswith("trap:") or "not important" in r["text"] for r in rows)
    assert time.monotonic() - t0 < 120


@pytest.mark.slow
@pytest.mark.parametrize("point", ["post.after_call:4", "collect.mid_transaction:7", "review.after_call:11", "review.before_call:20"])
def test_sigkill_then_restart_loses_nothing_and_pays_once(tmp_path, point):
    config = write_spec(tmp_path)
    state = tmp_path / "state"
    proc = run_cli(config, state, env_extra={"CAMPAIGN_TEST_CRASH": point})
    assert proc.returncode == -signal.SIGKILL, f"expected a crash at {point}; rc={proc.returncode}\n{proc.stderr[-2000:]}"
    proc = run_cli(config, state)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_consistent(state)


@pytest.mark.slow
def test_sigkill_at_random_instants(tmp_path):
    config = write_spec(tmp_path)
    state = tmp_path / "state"
    kill_at(run_args(config, state, seed=3), (1.5, 2.5, 3.5))
    proc = run_cli(config, state)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_consistent(state)


@pytest.mark.slow
def test_same_seed_same_scores_byte_for_byte(tmp_path):
    config = write_spec(tmp_path)
    outs = []
    for run in ("a", "b"):
        proc = run_cli(config, tmp_path / run, seed=11)
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs.append(((tmp_path / run / "e2e" / "scores.csv").read_bytes(), (tmp_path / run / "e2e" / "scores.jsonl").read_bytes()))
    assert outs[0] == outs[1]
    proc = run_cli(config, tmp_path / "c", seed=12)
    assert (tmp_path / "c" / "e2e" / "scores.csv").read_bytes() != outs[0][0]


@pytest.mark.slow
def test_bad_spec_posts_nothing(tmp_path):
    config = write_spec(tmp_path, budget="0.10")
    proc = run_cli(config, tmp_path / "state")
    assert proc.returncode == 2
    assert "below the cost of one HIT" in proc.stderr
    assert not (tmp_path / "state" / "market").exists()


@pytest.mark.slow
def test_production_needs_explicit_opt_in(tmp_path):
    p = spec_file(tmp_path / "prod.yaml", e2e_campaign(marketplace="mturk", crowd=NO_CROWD))
    proc = run_cli(p, tmp_path / "state")
    assert proc.returncode == 2 and "--production" in proc.stderr


LIKERT_THEN_RANKING = [{"name": "likert", "kind": "likert"},
                       {"name": "ranking", "kind": "ranking", "source": "likert", "shortlist": 30, "keep": 15, "batch_pairs": 40,
                        "pair_budget": 0.2}]


def two_stage_campaign(stages: list[dict[str, Any]] = LIKERT_THEN_RANKING, **crowd: Any) -> dict[str, Any]:
    """Likert over the demo, then ranking of its 30 best; 30 simulated workers (`crowd`: more of their settings)."""
    return campaign("e2e", stages=stages, budget="40.00", crowd=simulated(30, speed=3600, arrival_span="30m", **crowd))


@pytest.mark.slow
def test_two_stage_ranking_survives_a_crash_mid_batch(tmp_path):
    config = spec_file(tmp_path / "two.yaml", two_stage_campaign())
    state = tmp_path / "state"
    # the Likert stage has 60 assignments; the 75th approval falls inside the first ranking batch
    proc = run_cli(config, state, env_extra={"CAMPAIGN_TEST_CRASH": "review.after_call:75"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    proc = run_cli(config, state)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = audit(state)
    annotations = [h["RequesterAnnotation"] for h in facts["hits"]]
    assert len(annotations) == len(set(annotations)) == len(facts["local_hits"])
    assert set(facts["remote"]) == set(facts["local"])
    charges = [e for e in facts["ledger"] if e.kind == "charge"]
    assert BALANCE - facts["balance"] == sum(Decimal(e.amount) for e in charges)
    # every comparison the marketplace holds is counted once in the export, none twice
    from campaign.tasks import ranking

    keys_by_annotation = {h.annotation: (h.stage, h.keys(), h.hit_key) for h in facts["local_hits"]}
    answers = []
    for hit, a in facts["remote"].values():
        stage, keys, hit_key = keys_by_annotation[hit["RequesterAnnotation"]]
        if stage == "ranking":
            answers.append((a, hit_key, ranking.parse(parse_answer_xml(a["Answer"]), keys)))
    # the ranking-stage policy re-run on the marketplace's answers names the workers the store left out
    labels = [Label(item=f"{hk}|{j.item_key}", worker=a["WorkerId"], assignment=a["AssignmentId"], value=-j.value)
              for a, hk, js in answers for j in js]
    excluded = review(labels, [], PolicyConfig()).excluded
    store = Store.open(state)
    from campaign.store import JudgmentRow

    with store.session() as s:
        stored = {w for w, in [(r,) for r in s.exec(select(JudgmentRow.worker_id).where(
            JudgmentRow.stage == "ranking", JudgmentRow.excluded == True)).all()]}  # noqa: E712
    store.close()
    assert stored == excluded
    wins, comparisons = defaultdict(int), defaultdict(int)
    for a, _, js in answers:
        if a["AssignmentStatus"] != "Approved" or a["WorkerId"] in excluded:
            continue
        for w, l in ranking.pairs(js):
            wins[w] += 1
            comparisons[w] += 1
            comparisons[l] += 1
    rows = {r["item"]: r for r in map(json.loads, open(state / "e2e" / "scores.jsonl", encoding="utf-8"))}
    ranked = [r for r in rows.values() if r["score"] is not None]
    assert len(ranked) >= 30
    for r in ranked:
        assert (r["comparisons"], r["wins"]) == (comparisons[r["item"]], wins[r["item"]]), r["item"]
    assert sum(r["kept"] for r in rows.values()) == 15


@pytest.mark.slow
def test_nugget_campaign_runs_end_to_end_with_explicit_empty_answers(tmp_path):
    state = tmp_path / "state"
    proc = run_campaign(*run_args(ROOT / "campaigns.yaml", state, "--campaign", "water-nuggets"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    gold = [json.loads(line) for line in open(state / "water-nuggets" / "gold_nuggets.jsonl", encoding="utf-8")]
    assert gold and all(g["workers"] >= 3 and g["last"] - g["first"] + 1 >= 3 for g in gold)
    store = Store.open(state)
    from campaign.store import ItemRow, JudgmentRow

    with store.session() as s:
        texts = dict(s.exec(select(ItemRow.item_key, ItemRow.text)).all())
        hits = {h.hit_key: h.keys() for h in s.exec(select(HitRow)).all()}
        assignments = s.exec(select(AssignmentRow).where(AssignmentRow.valid == True)).all()  # noqa: E712
        judgments = s.exec(select(JudgmentRow)).all()
    store.close()
    for g in gold:
        assert g["text"] == " ".join(texts[g["item"]].split()[g["first"]:g["last"] + 1])
    # one judgment per sentence shown per answer, the empty ones included
    assert len(judgments) == sum(len(hits[a.hit_key]) for a in assignments)
    assert any(j.value == 0 for j in judgments) and any(j.value > 0 for j in judgments)


# The ranking stage's auto-approval delay is long here so that the "half the delay has passed" rule
# (approve rather than let the marketplace pay unreviewed work) cannot fire on a slow machine: at 3600x a
# 2-day delay is 24 real seconds, less than a loaded machine may need to fill a batch. This test is about
# holding work until its worker can be judged, not about that rule. The pair budget is larger than the
# crash test's: the window planner covers 10 pairs with every 5-item HIT, and workers need several ranking
# HITs each before the policy can judge them.
SPAMMY_STAGES = [LIKERT_THEN_RANKING[0],
                 LIKERT_THEN_RANKING[1] | {"pair_budget": 0.6, "auto_approval_delay": "30d", "traps": {"share": 0.5}}]
SPAM_MIX = {"diligent": 0.55, "noisy": 0.15, "random_spammer": 0.15, "constant_spammer": 0.15}


@pytest.mark.slow
def test_ranking_stage_holds_and_rejects_only_spam(tmp_path):
    """Ranking work is held until its worker can be judged; clear spam (no agreement with the rest and a
    misplaced check sentence) is rejected and not paid, honest work never is, and the books still balance."""
    from campaign.crowd.models import make_pool
    from campaign.spec import load_spec

    config = spec_file(tmp_path / "spammy.yaml", two_stage_campaign(SPAMMY_STAGES, mix=SPAM_MIX))
    crowd = load_spec(config).campaigns[0].crowd
    kinds = {w.worker_id: w.kind for w in make_pool(crowd.workers, 3, dict(crowd.mix), arrival_span=crowd.arrival_span)}
    state = tmp_path / "state"
    proc = run_cli(config, state, seed=3)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = audit(state)
    ranking_hits = {h.hit_id for h in facts["local_hits"] if h.stage == "ranking"}
    ranking = [a for h, a in facts["remote"].values() if h["HITId"] in ranking_hits]
    rejected = [a for a in ranking if a["AssignmentStatus"] == "Rejected"]
    assert rejected, "no ranking-stage spam was rejected"
    assert {kinds[a["WorkerId"]] for a in rejected} <= {"random_spammer", "constant_spammer"}
    spam = [a for a in ranking if kinds[a["WorkerId"]].endswith("spammer")]
    paid_spam = [a for a in spam if a["AssignmentStatus"] == "Approved"]
    assert len(paid_spam) < len(spam)
    charges = [e for e in facts["ledger"] if e.kind == "charge"]
    assert sorted(e.assignment_id for e in charges) == sorted(
        aid for aid, (_, a) in facts["remote"].items() if a["AssignmentStatus"] == "Approved")
    assert BALANCE - facts["balance"] == sum(Decimal(e.amount) for e in charges)
    print(f"ranking assignments {len(ranking)}, by spammers {len(spam)}, rejected {len(rejected)}, spam paid {len(paid_spam)}")
