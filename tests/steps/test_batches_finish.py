from __future__ import annotations

import csv
import json

from campaign.steps.batches import candidates, plan_next_batch, stage_complete
from campaign.steps.collect import collect
from campaign.steps.finish import finish_if_done
from campaign.steps.pipeline import PIPELINE, run_pass, steps_for
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending
from campaign.steps.quality_pass import quality_pass
from campaign.steps.review import close_finished_hits, review
from campaign.steps.stages import stage_done
from campaign.store import CampaignRow


def by_length(form):
    return [(s.radio_name, str(1 + len(s.text) % 5)) for s in form.slots if s.radio_name]


def by_shortness(form):
    """Ratings that fall with a statement's length, as `shortest_first` orders them."""
    return [(s.radio_name, str(max(1, 5 - len(s.text) // 80))) for s in form.slots if s.radio_name]


def shortest_first(form):
    order = sorted(form.slots, key=lambda s: (len(s.text), s.index))
    return [("order", ",".join(str(s.index) for s in order))]


def work_stage(h, stage, answer, workers=2):
    """Post the stage's drafts, let `workers` workers answer every HIT, and decide and close them."""
    post_pending(h.ctx)
    for hit in h.hits(stage):
        if hit.status == "posted":
            for w in range(workers):
                h.work(f"AWORKER{w:07d}", hit.hit_id, answer)
    collect(h.ctx)
    quality_pass(h.ctx)
    review(h.ctx)
    close_finished_hits(h.ctx)


def likert_worked(h, rate):
    """The two-stage campaign's items loaded and its Likert stage planned and answered by `rate`; returns
    its (likert, ranking) stages."""
    likert, ranking = h.ctx.campaign.stages
    load_items(h.ctx)
    plan_stage(h.ctx, likert)
    work_stage(h, "likert", rate)
    return likert, ranking


def rank_to_the_end(h, ranking):
    """Plan and answer the ranking stage's batches (`shortest_first`) until it is complete."""
    while not stage_complete(h.ctx, ranking):
        plan_next_batch(h.ctx, ranking)
        work_stage(h, "ranking", shortest_first)


def test_batches_wait_for_the_previous_batch_and_stop_when_the_kind_says_so(harness):
    h = harness("two-stage")
    _, ranking = likert_worked(h, by_length)
    assert stage_done(h.ctx, "likert")

    first = plan_next_batch(h.ctx, ranking)
    assert first > 0
    chosen = candidates(h.ctx, ranking)
    assert 8 <= len(chosen) <= 10  # top 8 of the Likert stage, plus ties with the 8th
    assert json.loads(h.ctx.store.get_kv(h.ctx.name, "shortlist:ranking")) == chosen  # fixed once, in the store
    assert plan_next_batch(h.ctx, ranking) == 0  # batch 0 still open
    state = json.loads(h.ctx.store.get_kv(h.ctx.name, "batch_state:ranking"))
    # the kind's state: the pairs planned so far, and the TrueSkill model they were planned from
    assert state["pairs"] and all(a in chosen and b in chosen for a, b in state["pairs"])
    assert state["model"]["items"] == chosen and state["model"]["applied"] == 0
    assert all(set(hit.keys()) <= set(chosen) for hit in h.hits("ranking"))

    batches = 1
    while not stage_complete(h.ctx, ranking):
        work_stage(h, "ranking", shortest_first)
        planned = plan_next_batch(h.ctx, ranking)
        batches += planned > 0
        assert batches < 20
    assert batches >= 2
    assert h.ctx.store.get_kv(h.ctx.name, "ranking_batch:ranking:0000") is not None  # progress of batch 0, for the report
    work_stage(h, "ranking", shortest_first)
    assert stage_done(h.ctx, "ranking")


def test_finish_writes_the_last_stage_kinds_export_once_every_stage_is_done(harness):
    h = harness("two-stage")
    likert, ranking = h.ctx.campaign.stages
    load_items(h.ctx)
    plan_stage(h.ctx, likert)
    assert not finish_if_done(h.ctx)
    work_stage(h, "likert", by_length)
    assert not finish_if_done(h.ctx)  # the ranking stage has not started
    rank_to_the_end(h, ranking)
    assert finish_if_done(h.ctx)
    with h.ctx.store.session() as s:
        assert s.get(CampaignRow, h.ctx.name).status == "finished"
    with open(h.ctx.out_dir() / "scores.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["rank", "item", "score", "uncertainty", "comparisons", "wins", "kept",
                             "likert_score", "likert_n", "likert_sd", "text", "comparison_score", "comparison_uncertainty"]
    assert len(rows) == 10 and sum(r["kept"] == "True" for r in rows) == 4
    ranked = [r for r in rows if r["score"]]
    # workers put shorter statements first: the refit agrees
    lengths = [len(r["text"]) for r in ranked]
    assert lengths[0] < lengths[-1]
    assert all(r["likert_score"] for r in rows)
    # the ratings here (1 + length mod 5) say nothing about the order by length: the comparisons stand alone
    assert all(r["score"] == r["comparison_score"] and r["uncertainty"] == r["comparison_uncertainty"] for r in ranked)


def test_the_pipeline_declares_which_steps_run_in_which_status(harness):
    names = {status: [s.name for s in steps_for(status)] for status in ("running", "paused", "cancelling", "finished")}
    assert names["finished"] == []
    assert "post" in names["running"] and "batches" in names["running"] and "review" in names["running"]
    assert not {"post", "batches", "review", "blocks"} & set(names["paused"])
    assert {"collect", "quality", "close"} <= set(names["paused"])  # collecting goes on while paused
    assert {"cancel", "post-interrupted"} <= set(names["cancelling"]) and "post" not in names["cancelling"]
    assert len({s.name for s in PIPELINE}) == len(PIPELINE)
    h = harness()
    assert run_pass(h.ctx, "running") == names["running"]
    assert {x.status for x in h.hits()} == {"posted"}


def test_the_ranking_export_adds_ratings_that_agree_with_the_comparisons(harness):
    h = harness("two-stage")
    _, ranking = likert_worked(h, by_shortness)
    rank_to_the_end(h, ranking)
    assert finish_if_done(h.ctx)
    with open(h.ctx.out_dir() / "scores.csv", encoding="utf-8") as fh:
        ranked = [r for r in csv.DictReader(fh) if r["score"]]
    assert all(float(r["uncertainty"]) <= float(r["comparison_uncertainty"]) for r in ranked)
    assert any(float(r["uncertainty"]) < float(r["comparison_uncertainty"]) for r in ranked)
    assert [float(r["score"]) for r in ranked] == sorted((float(r["score"]) for r in ranked), reverse=True)
