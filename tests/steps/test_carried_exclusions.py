"""A worker quality control excluded in one stage has their labels left out of the other stages too, and
once that stage is done is kept out of the later stages' HITs."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from campaign.quality.review import Decision, ReviewResult
from campaign.state import Keys
from campaign.steps.batches import plan_next_batch
from campaign.steps.collect import collect
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending
from campaign.steps.quality_pass import _dump, leave_out_labels, quality_pass, stage_review
from campaign.steps.stages import stage_done
from campaign.store import HitRow, JudgmentRow
from tests.steps.test_batches_finish import by_length, likert_worked, shortest_first, work_stage

EXCLUDED = "AWORKER0000001"


def _labels(h, stage: str) -> dict[str, set[bool]]:
    with h.ctx.store.session() as s:
        rows = s.exec(select(JudgmentRow).where(JudgmentRow.campaign == h.ctx.name, JudgmentRow.stage == stage)).all()
    out: dict[str, set[bool]] = {}
    for r in rows:
        out.setdefault(r.worker_id, set()).add(r.excluded)
    return out


def test_labels_of_a_worker_the_likert_stage_excluded_are_left_out_of_the_ranking(harness):
    h = harness("two-stage")
    likert, ranking = likert_worked(h, by_length)
    # the Likert stage's review excluded one of the two workers (as it does a random answerer)
    saved = stage_review(h.ctx, likert)
    assert saved is not None and not saved.excluded
    n = json.loads(h.ctx.store.get_kv(h.ctx.name, Keys.review("likert")))["n"]
    excluded = ReviewResult(evidence=saved.evidence, decisions=[Decision("exclude", EXCLUDED, "answered at random")])
    h.ctx.store.set_kv(h.ctx.name, Keys.review("likert"), _dump(n, excluded))

    assert plan_next_batch(h.ctx, ranking) > 0
    work_stage(h, "ranking", shortest_first)  # both workers order every HIT; the ranking's review runs
    ranking_review = stage_review(h.ctx, ranking)
    assert ranking_review is not None and EXCLUDED not in ranking_review.excluded  # not the ranking's own call
    labels = _labels(h, "ranking")
    assert labels == {"AWORKER0000000": {False}, EXCLUDED: {True}}
    assert _labels(h, "likert") == {"AWORKER0000000": {False}, EXCLUDED: {True}}  # every stage follows any stage's review
    assert quality_pass(h.ctx) == 0  # nothing new: nothing reviewed, nothing changed
    assert _labels(h, "ranking") == labels

    # the other way round: a worker the ranking's review excludes has their Likert labels left out too
    other = "AWORKER0000000"
    leave_out_labels(h.ctx, ranking, ReviewResult(evidence=ranking_review.evidence,
                                                  decisions=[Decision("exclude", other, "failed the check statements")]))
    assert _labels(h, "likert") == {other: {True}, EXCLUDED: {True}}
    assert _labels(h, "ranking") == {other: {True}, EXCLUDED: {True}}


def test_a_worker_excluded_in_a_finished_stage_is_kept_out_of_the_later_stages_hits(harness):
    from campaign.market.worker_client import WorkerAPIError
    from campaign.steps.review import close_finished_hits, review
    from campaign.steps.shut_out import shut_out

    h = harness("two-stage")
    likert, ranking = h.ctx.campaign.stages
    load_items(h.ctx)
    plan_stage(h.ctx, likert)
    post_pending(h.ctx)
    first, *rest = sorted(h.hits("likert"), key=lambda x: x.id)
    for w in range(2):
        h.work(f"AWORKER{w:07d}", first.hit_id, by_length)
    collect(h.ctx)
    quality_pass(h.ctx)
    saved = stage_review(h.ctx, likert)
    assert saved is not None
    n = json.loads(h.ctx.store.get_kv(h.ctx.name, Keys.review("likert")))["n"]
    # the Likert stage's review excluded a worker while the stage is under way: nobody is kept out yet
    # (a stage under way may still clear them)
    h.ctx.store.set_kv(h.ctx.name, Keys.review("likert"),
                       _dump(n, ReviewResult(evidence=saved.evidence, decisions=[Decision("exclude", EXCLUDED, "at random")])))
    assert shut_out(h.ctx) == 0
    for hit in rest:
        for w in range(2):
            h.work(f"AWORKER{w:07d}", hit.hit_id, by_length)
    collect(h.ctx)
    review(h.ctx)
    close_finished_hits(h.ctx)
    assert stage_done(h.ctx, "likert")
    assert shut_out(h.ctx) == 1  # the stage is done: its exclusion is final
    assert shut_out(h.ctx) == 0  # once
    assert json.loads(h.ctx.store.get_kv(h.ctx.name, Keys.SHUT_OUT)) == [EXCLUDED]

    assert plan_next_batch(h.ctx, ranking) > 0
    post_pending(h.ctx)
    hit = h.hits("ranking")[0]
    h.workers.register("AWORKER0000002")
    with pytest.raises(WorkerAPIError) as err:
        h.workers.accept(EXCLUDED, hit.hit_id)
    assert err.value.code == "DoesNotMeetRequirements"
    assert h.workers.accept("AWORKER0000000", hit.hit_id)["AssignmentId"]
    assert h.workers.accept("AWORKER0000002", hit.hit_id)["AssignmentId"]  # a worker new to the campaign
    assert h.ctx.store.get_kv(h.ctx.name, Keys.shut_out_stage("ranking")) == h.ctx.store.get_kv(h.ctx.name, Keys.SHUT_OUT_GROUP)
    assert h.ctx.store.get_kv(h.ctx.name, Keys.shut_out_stage("likert")) == ""  # the first stage shuts nobody out


def test_a_later_stage_an_older_release_began_posting_keeps_its_hit_type(harness):
    from campaign.steps.shut_out import shut_out_groups

    h = harness("two-stage")
    _, ranking = likert_worked(h, by_length)
    assert plan_next_batch(h.ctx, ranking) > 0
    with h.ctx.store.session() as s:  # posted by a release without shut-out groups: a HIT id, no decision stored
        row = s.exec(select(HitRow).where(HitRow.campaign == h.ctx.name, HitRow.stage == "ranking")).first()
        row.hit_id = "OLDHIT"
        s.add(row)
    assert shut_out_groups(h.ctx, ranking) == ()
    assert h.ctx.store.get_kv(h.ctx.name, Keys.shut_out_stage("ranking")) == ""


def test_a_stored_review_is_parsed_once_and_a_new_one_is_read_at_once(harness):
    h = harness("two-stage")
    likert = h.ctx.campaign.stages[0]
    assert stage_review(h.ctx, likert) is None
    first = ReviewResult(evidence={}, decisions=[Decision("exclude", EXCLUDED, "answered at random")])
    h.ctx.store.set_kv(h.ctx.name, Keys.review("likert"), _dump(10, first))
    got = stage_review(h.ctx, likert)
    assert got is not None and got.excluded == {EXCLUDED}
    assert stage_review(h.ctx, likert) is got  # the same stored text: the same parse
    # another process (an operator's decision, another daemon) stores a new review: seen at the next call
    h.ctx.store.set_kv(h.ctx.name, Keys.review("likert"), _dump(11, ReviewResult(evidence={}, decisions=[])))
    again = stage_review(h.ctx, likert)
    assert again is not got and again is not None and again.excluded == set()
