"""Quality control reads only the labels stored since its last run and sees exactly what a full
read sees."""

from __future__ import annotations

import dataclasses

from campaign.steps.collect import collect
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending
from campaign.steps.quality_pass import evaluate, new_judgments, running_evidence


def test_evidence_kept_from_pass_to_pass_equals_a_fresh_daemon_reading_every_label(harness, rate):
    h = harness(n_items=20)
    load_items(h.ctx)
    stage = h.ctx.campaign.stages[0]
    plan_stage(h.ctx, stage)
    post_pending(h.ctx)
    hits = sorted(h.hits(), key=lambda x: x.id)
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
        assert sum(kept.labels.values()) + sum(kept.traps_seen.values()) == len(rows)  # every label counted once
    assert seen[0] < seen[1] < seen[2]  # each round brought new labels
    assert h.ctx.cache[f"evidence:{stage.name}"]["after"] > 0


def test_items_let_go_and_read_back_from_the_store_leave_the_evidence_exact(harness, rate):
    """Each item is let go after its first label here (a stage copy that asks one answer), so every later
    worker's label reads the item's earlier labels back from the store first."""
    h = harness(n_items=20)
    load_items(h.ctx)
    stage = h.ctx.campaign.stages[0]
    one = dataclasses.replace(stage, assignments=1)
    plan_stage(h.ctx, stage)
    post_pending(h.ctx)
    hits = sorted(h.hits(), key=lambda x: x.id)
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
        assert {w: s.n for w, s in kept.sums.items()} == {w: s.n for w, s in fresh.sums.items()}
        # every label is counted once, whether its item is held or let go
        assert sum(kept.retired.values()) == sum(fresh.retired.values()) + sum(len(flat) // 2 for flat in fresh.items.values())
    assert len(books) == 1  # read back each time, never read again from the first label


def test_labels_read_back_that_differ_from_what_was_counted_make_it_read_everything_again(harness, rate):
    h = harness(n_items=10)
    load_items(h.ctx)
    stage = h.ctx.campaign.stages[0]
    one = dataclasses.replace(stage, assignments=1)
    plan_stage(h.ctx, stage)
    post_pending(h.ctx)
    hits = sorted(h.hits(), key=lambda x: x.id)
    for hit in hits:
        h.work("AZULU0000001", hit.hit_id, rate(1))
    collect(h.ctx, sweep=len(hits))
    book = running_evidence(h.ctx, one)
    assert book is not None and book.retired
    book.retired = {item: n + 1 for item, n in book.retired.items()}  # as if a label it had went missing
    for hit in hits:
        h.work("AALPHA000001", hit.hit_id, rate(2))
    collect(h.ctx, sweep=len(hits))
    again = running_evidence(h.ctx, one)
    fresh = running_evidence(dataclasses.replace(h.ctx, cache={}), stage)
    assert again is not book and again is not None and fresh is not None  # a new book, read from the first label
    assert again.evidence(2) == fresh.evidence(2)
