"""Quality control reads only the labels stored since its last run and sees exactly what a full
read sees."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from sqlmodel import select

from campaign.quality.evidence import WorkerEvidence
from campaign.quality.review import Decision, ReviewResult
from campaign.steps import quality_pass as quality_pass_module
from campaign.steps.collect import collect
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending
from campaign.steps.quality_pass import (
    apply,
    changed_workers,
    evaluate,
    new_judgments,
    quality_pass,
    running_evidence,
    stage_review,
)
from campaign.store import WorkerRow


def _posted(h):
    """The harness's first stage, its items loaded and every HIT planned and posted (in id order)."""
    load_items(h.ctx)
    stage = h.ctx.campaign.stages[0]
    plan_stage(h.ctx, stage)
    post_pending(h.ctx)
    return stage, sorted(h.hits(), key=lambda x: x.id)


def test_evidence_kept_from_pass_to_pass_equals_a_fresh_daemon_reading_every_label(harness, rate):
    h = harness(n_items=20)
    stage, hits = _posted(h)
    seen = []
    # workers in an order that interleaves assignment ids, so new labels sort among the old ones
    for n, worker in enumerate(("AZULU0000001", "AALPHA000001", "AMIKE0000001")):
        for hit in hits[n:]:
            h.work(worker, hit.hit_id, rate(1 + n))
        collect(h.ctx, sweep=len(hits))
        kept = running_evidence(h.ctx, stage)
        fresh_ctx = dataclasses.replace(h.ctx, cache={})  # a fresh (or restarted) daemon reads them all
        fresh = running_evidence(fresh_ctx, stage)
        assert kept is not None and fresh is not None
        assert kept.evidence(2) == fresh.evidence(2)
        assert evaluate(h.ctx, stage) == evaluate(fresh_ctx, stage)
        rows, _ = new_judgments(fresh_ctx, stage, 0)
        seen.append(len(rows))
        assert int(kept.workers.labels.sum() + kept.workers.traps_seen.sum()) == len(rows)  # every label counted once
    assert seen[0] < seen[1] < seen[2]  # each round brought new labels
    assert h.ctx.cache[f"evidence:{stage.name}"]["after"] > 0


def test_items_let_go_and_read_back_from_the_store_leave_the_evidence_exact(harness, rate):
    """Each item is let go after its first label here (a stage copy that asks one answer), so every later
    worker's label reads the item's earlier labels back from the store first."""
    h = harness(n_items=20)
    stage, hits = _posted(h)
    one = dataclasses.replace(stage, assignments=1)
    books = set()
    for n, worker in enumerate(("AZULU0000001", "AALPHA000001", "AMIKE0000001")):
        for hit in hits[n:]:
            h.work(worker, hit.hit_id, rate(1 + n))
        collect(h.ctx, sweep=len(hits))
        kept = running_evidence(h.ctx, one)
        assert kept is not None and kept.retired and not kept.items  # every item let go after the pass
        books.add(id(kept))
        fresh = running_evidence(dataclasses.replace(h.ctx, cache={}), stage)
        assert fresh is not None
        assert kept.evidence(2) == fresh.evidence(2)
        assert {w: int(kept.workers.n[r]) for w, r in kept.workers.index.items()} == \
                {w: int(fresh.workers.n[r]) for w, r in fresh.workers.index.items()}
        # every label is counted once, whether its item is held or let go
        assert kept.retired.total() == fresh.retired.total() + sum(len(flat) // 2 for flat in fresh.items.values())
    assert len(books) == 1  # read back each time, never read again from the first label


def test_labels_read_back_that_differ_from_what_was_counted_make_it_read_everything_again(harness, rate):
    h = harness(n_items=10)
    stage, hits = _posted(h)
    one = dataclasses.replace(stage, assignments=1)
    for hit in hits:
        h.work("AZULU0000001", hit.hit_id, rate(1))
    collect(h.ctx, sweep=len(hits))
    book = running_evidence(h.ctx, one)
    assert book is not None and book.retired
    items = {k for hit in hits for k in hit.keys()}
    book.retired.update({k: book.retired[k] + 1 for k in items if k in book.retired})  # as if a label it had went missing
    for hit in hits:
        h.work("AALPHA000001", hit.hit_id, rate(2))
    collect(h.ctx, sweep=len(hits))
    again = running_evidence(h.ctx, one)
    fresh = running_evidence(dataclasses.replace(h.ctx, cache={}), stage)
    assert again is not book and again is not None and fresh is not None  # a new book, read from the first label
    assert again.evidence(2) == fresh.evidence(2)


def _ev(w: str, labels: int, r: float | None = 0.5) -> WorkerEvidence:
    return WorkerEvidence(worker=w, labels=labels, shared_items=labels, correlation=r, traps_seen=0, traps_passed=0, constant=False)


def test_only_workers_whose_figures_changed_are_written_again():
    before = ReviewResult(evidence={"A": _ev("A", 5), "B": _ev("B", 5), "C": _ev("C", 5), "D": _ev("D", 5)},
                          decisions=[Decision("exclude", "C", "low agreement"), Decision("exclude", "D", "spam")])
    after = ReviewResult(evidence={"A": _ev("A", 5), "B": _ev("B", 6), "C": _ev("C", 5), "D": _ev("D", 5), "E": _ev("E", 1)},
                         decisions=[Decision("exclude", "D", "spam"), Decision("reject", "D", "clear spam")])
    # A unchanged; B new evidence; C no longer excluded; D same exclusion, another reason; E new
    assert changed_workers(after, before) == {"B", "C", "D", "E"}
    assert changed_workers(after, after) == set()


def test_writing_the_changed_workers_only_leaves_every_row_as_writing_them_all(harness, rate):
    h = harness(n_items=20)
    stage, hits = _posted(h)
    workers = ("AZULU0000001", "AALPHA000001", "AMIKE0000001")
    for n, worker in enumerate(workers):
        for hit in hits[: len(hits) // 2]:
            h.work(worker, hit.hit_id, rate(1 + n))
    collect(h.ctx, sweep=len(hits))
    assert quality_pass(h.ctx) == 1
    for n, worker in enumerate(workers[:2]):  # the third worker does nothing more
        for hit in hits[len(hits) // 2:]:
            h.work(worker, hit.hit_id, rate(5 - n))
    collect(h.ctx, sweep=len(hits))
    previous = stage_review(h.ctx, stage)
    result = evaluate(h.ctx, stage)
    assert previous is not None and changed_workers(result, previous)

    def rows() -> dict:
        with h.ctx.store.session() as s:
            return {w.worker_id: (w.excluded, w.reason, w.evidence) for w in s.exec(select(WorkerRow)).all()}

    apply(h.ctx, stage, result, previous=previous)
    some = rows()
    apply(h.ctx, stage, result)  # every worker
    assert rows() == some


@pytest.mark.parametrize("page", [1, 4, 7, 5_000])
def test_evidence_read_a_page_at_a_time_equals_reading_every_label_at_once(harness, rate, monkeypatch, page):
    """A daemon taking over a campaign reads its labels a page at a time (whole assignments each), as if
    each page were a pass: the same book as one read of everything, whatever the page's size, even one
    smaller than an assignment's labels."""
    h = harness(n_items=20)
    stage, hits = _posted(h)
    for n, worker in enumerate(("AZULU0000001", "AALPHA000001", "AMIKE0000001")):
        for hit in hits[n:]:
            h.work(worker, hit.hit_id, rate(1 + n))
    collect(h.ctx, sweep=len(hits))
    whole = running_evidence(dataclasses.replace(h.ctx, cache={}), stage)
    rows, last = new_judgments(h.ctx, stage, 0)
    monkeypatch.setattr(quality_pass_module, "EVIDENCE_PAGE", page)
    reads = []
    real = quality_pass_module.judgment_page

    def counted(*a, **kw):
        got = real(*a, **kw)
        reads.append(len(got[0]))
        return got

    monkeypatch.setattr(quality_pass_module, "judgment_page", counted)
    paged_ctx = dataclasses.replace(h.ctx, cache={})
    paged = running_evidence(paged_ctx, stage)
    assert whole is not None and paged is not None
    assert paged.evidence(2) == whole.evidence(2)
    assert {w: int(paged.workers.n[r]) for w, r in paged.workers.index.items()} == \
        {w: int(whole.workers.n[r]) for w, r in whole.workers.index.items()}
    assert paged_ctx.cache[f"evidence:{stage.name}"]["after"] == last
    assert sum(reads) == len(rows)
    biggest = max(Counter(r.assignment_id for r in rows).values())  # one assignment's labels
    assert max(reads) <= max(page, biggest)  # whole assignments, a page's worth at most
    if page < len(rows):
        assert len(reads) > 2
