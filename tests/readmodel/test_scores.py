"""`counted_judgments`: the labels that count, read row by row with each repeated id kept once; `counted_values`:
the same labels' values by item, which is all a stage's scores read."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from sqlalchemy import insert

from campaign.metrics.reliability import REPEAT_PREFIX
from campaign.readmodel.scores import compute_scores, counted_judgments, counted_values
from campaign.store import AssignmentRow, JudgmentRow, Store
from campaign.tasks.base import TRAP_PREFIX, summarise


def _fill(store: Store, hits: int, excluded_every: int = 7) -> None:
    assignments, judgments = [], []
    for h in range(hits):
        for k in range(5):
            aid = f"A{h:05d}-{k}"
            status = "rejected" if (h, k) == (0, 0) else "approved"
            hit_key = f"{REPEAT_PREFIX}h{h}" if h == 1 else f"h{h}"  # a repeat HIT's answers never count
            assignments.append(dict(assignment_id=aid, campaign="c", stage="likert", hit_key=hit_key, hit_id=f"HIT{h}",
                                    worker_id=f"W{(h + k) % 9}", status=status, answer_xml="", submit_time=0.0, collected_at=0.0))
            for i in range(5):
                n = len(judgments)
                judgments.append(dict(campaign="c", stage="likert", assignment_id=aid, worker_id=f"W{(h + k) % 9}",
                                      item_key=f"p{h * 5 + i:05d}", value=float(1 + n % 5),
                                      extra=json.dumps({"spans": [[0, n % 3]]}) if n % 4 == 0 else None,
                                      excluded=n % excluded_every == 0))
    with store.session() as s:
        s.execute(insert(AssignmentRow), assignments)
        s.execute(insert(JudgmentRow), judgments)
        s.commit()


def test_the_counted_labels_are_the_approved_kept_ones_in_item_then_assignment_order(tmp_path) -> None:
    store = Store.open(tmp_path)
    _fill(store, hits=6)
    got = counted_judgments(store, "c", "likert")
    with store.session() as s:
        rows = s.execute(JudgmentRow.__table__.select()).mappings().all()  # type: ignore[attr-defined]
    hits = {f"A{h:05d}-{k}": (f"{REPEAT_PREFIX}h{h}" if h == 1 else f"h{h}") for h in range(6) for k in range(5)}
    want = sorted(((r["item_key"], r["assignment_id"]), r) for r in rows
                  if not r["excluded"] and r["assignment_id"] != "A00000-0" and not hits[r["assignment_id"]].startswith(REPEAT_PREFIX))
    assert [(j.item_key, j.assignment_id, j.value, j.worker_id, j.hit_key) for j in got] == \
        [(r["item_key"], r["assignment_id"], r["value"], r["worker_id"], hits[r["assignment_id"]]) for _, r in want]
    assert [dict(j.extra) for j in got] == [json.loads(r["extra"]) if r["extra"] else {} for _, r in want]
    empty = [j.extra for j in got if not j.extra]
    assert empty and all(e is empty[0] for e in empty)  # one shared mapping
    with pytest.raises(TypeError):
        empty[0]["x"] = 1  # type: ignore[index]  # and read-only, so sharing it cannot leak a change
    by_assignment = {}
    for j in got:  # each id kept once: every label of an assignment holds the same string
        assert by_assignment.setdefault(j.assignment_id, j.assignment_id) is j.assignment_id


def test_reading_a_stage_holds_what_the_labels_need_not_every_row_at_once(tmp_path) -> None:
    store = Store.open(tmp_path)
    _fill(store, hits=400, excluded_every=10**9)  # 10,000 labels
    counted_judgments(store, "c", "likert")  # the first read compiles and caches the statement
    tracemalloc.start()
    got = counted_judgments(store, "c", "likert")
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(got) == 10_000 - 5 - 25  # less the rejected answer's 5 labels and the repeat HIT's 25
    # each label's own figures and ids kept once, no second copy of the rows on the way: ~250 bytes a
    # label here, a quarter of them with extra figures (every row fetched first, each with its own
    # copies of the ids: ~650)
    assert held <= peak < 400 * len(got)


def test_the_values_by_item_are_the_counted_labels_values_without_traps(tmp_path) -> None:
    store = Store.open(tmp_path)
    _fill(store, hits=30)
    with store.session() as s:  # a trap label on an approved assignment: counted, but never scored
        s.execute(insert(JudgmentRow), [dict(campaign="c", stage="likert", assignment_id="A00003-1", worker_id="W4",
                                             item_key=f"{TRAP_PREFIX}t1", value=1.0, extra=None, excluded=False)])
        s.commit()
    counted = counted_judgments(store, "c", "likert")
    assert any(j.item_key.startswith(TRAP_PREFIX) for j in counted)
    want: dict[str, list[float]] = {}
    for j in counted:
        if not j.item_key.startswith(TRAP_PREFIX):
            want.setdefault(j.item_key, []).append(j.value)
    got = counted_values(store, "c", "likert")
    assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in want.items()}
    assert compute_scores(store, "c", "likert", "likert") == [dict(r, text="") for r in summarise(want)]


def test_the_values_take_a_fraction_of_what_the_whole_labels_take(tmp_path) -> None:
    store = Store.open(tmp_path)
    _fill(store, hits=400, excluded_every=10**9)  # 10,000 labels
    counted_values(store, "c", "likert")  # each statement compiled and cached before it is measured
    counted_judgments(store, "c", "likert")
    peaks = []
    for read in (counted_values, counted_judgments):
        tracemalloc.start()
        got = read(store, "c", "likert")
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        del got
    assert peaks[0] * 2 < peaks[1]
