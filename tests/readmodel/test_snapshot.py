"""The dashboard's reader against stores built by hand: its numbers are the store's, its incremental
caches follow new rows (and heal when a row arrives out of order), ranking stages are found from the
data, and the vectorised series equals the plain one."""

from __future__ import annotations

import json
import time
from decimal import Decimal

import numpy as np
from sqlmodel import select

from campaign.readmodel.series import weighted_series, weighted_series_np
from campaign.readmodel.snapshot import Reader
from campaign.state import Keys
from campaign.store import AssignmentRow, CampaignRow, HitRow, JudgmentRow, KVRow, Store, WorkerRow
from tests.dashboard.test_status import make_store


def test_vectorised_series_equals_the_plain_one():
    rng = np.random.default_rng(3)
    workers = rng.integers(0, 7, size=200)
    buckets = rng.integers(0, 10, size=200)
    values = {f"w{i}": (None if i == 3 else float(rng.random())) for i in range(7)}
    counts: dict[tuple[str, int], int] = {}
    for w, b in zip(workers, buckets):
        counts[(f"w{w}", int(b))] = counts.get((f"w{w}", int(b)), 0) + 1
    plain = weighted_series([(w, b, c) for (w, b), c in counts.items()], values, 10)
    vec = weighted_series_np(workers, buckets, np.array([np.nan if values[f"w{i}"] is None else values[f"w{i}"]
                                                         for i in range(7)]), 10)
    assert [None if x is None else round(x, 12) for x in plain] == [None if x is None else round(x, 12) for x in vec]


def test_reader_numbers_are_the_store_numbers(tmp_path):
    store = make_store(tmp_path)
    v = Reader(store).campaign("c1", time.time())
    (st,) = v.stages
    assert (st.hits_planned, st.hits_posted, st.hits_closed) == (5, 4, 2)
    assert (st.collected, st.reviewed, st.pending) == (12, 9, 3)
    assert st.slots == 25
    assert (v.spent, v.reserved, v.budget) == (Decimal("0.49"), Decimal("0.77"), Decimal("5.00"))
    assert v.workers == 1 and v.workers_excluded == 1
    assert st.pairs is None and st.batch is None  # not planned in batches
    store.close()


def test_reader_follows_new_rows_and_heals_an_out_of_order_one(tmp_path):
    store = make_store(tmp_path)
    reader = Reader(store)
    assert reader.campaign("c1", time.time()).stages[0].collected == 12
    with store.session() as s:
        newest = max(a.collected_at for a in s.exec(select(AssignmentRow)).all())
        s.add(AssignmentRow(assignment_id="N1", campaign="c1", stage="likert", hit_key="h0", hit_id="H", worker_id="W9",
                            answer_xml="", collected_at=newest + 5))
        s.add(JudgmentRow(campaign="c1", stage="likert", assignment_id="N1", worker_id="W9", item_key="p1", value=3.0))
    v = reader.campaign("c1", time.time())
    assert v.stages[0].collected == 13 and v.stages[0].pending == 4 and v.labels == 1
    with store.session() as s:  # stored late with a time long before the newest: the count check catches it
        s.add(AssignmentRow(assignment_id="OLD", campaign="c1", stage="likert", hit_key="h0", hit_id="H", worker_id="W9",
                            answer_xml="", collected_at=newest - 86400))
        s.add(JudgmentRow(campaign="c1", stage="likert", assignment_id="OLD", worker_id="W9", item_key="p2", value=2.0,
                          excluded=True))
    v = reader.campaign("c1", time.time())
    assert v.stages[0].collected == 14 and v.labels == 2 and v.labels_excluded == 1
    store.close()


def test_ranking_stage_found_from_its_planned_pairs(tmp_path):
    """No task kind is consulted: a stage with planned pairs in the store shows its batch, pairs and the
    expected top-`keep` precision of the model over its approved rankings."""
    store = Store.open(tmp_path)
    spec = {"name": "r", "stages": [{"name": "likert"}, {"name": "rank", "keep": 2}]}
    items = ["a", "b", "c", "d", "e"]
    with store.session() as s:
        s.add(CampaignRow(name="r", fingerprint="f", spec_json=json.dumps(spec), budget="5.00"))
        for b in range(2):
            s.add(HitRow(campaign="r", stage="rank", hit_key=f"rank-b{b:03d}-0000", batch=b, item_keys=json.dumps(items),
                         annotation=f"a{b}", token=f"t{b}", status="closed", reward="0.05", assignments=3))
        # the ranking stage's batch state, as steps.batches keeps it
        s.add(KVRow(campaign="r", key=Keys.batch_state("rank"),
                    value=json.dumps({"pairs": [["a", "b"], ["a", "c"], ["b", "c"], ["d", "e"]], "model": None})))
        for k in range(6):  # everyone ranks a > b > c > d > e
            aid = f"R{k}"
            s.add(AssignmentRow(assignment_id=aid, campaign="r", stage="rank", hit_key=f"rank-b{k % 2:03d}-0000", hit_id="H",
                                worker_id=f"W{k}", status="approved", answer_xml="", collected_at=1000.0 + k))
            for pos, item in enumerate(items):
                s.add(JudgmentRow(campaign="r", stage="rank", assignment_id=aid, worker_id=f"W{k}", item_key=item, value=float(pos)))
        s.add(WorkerRow(campaign="r", worker_id="W0"))
    v = Reader(store).campaign("r", time.time())
    rank = next(st for st in v.stages if st.name == "rank")
    likert = next(st for st in v.stages if st.name == "likert")
    assert (rank.batch, rank.pairs, rank.keep) == (1, 4, 2)
    assert rank.precision is not None and 0.5 < rank.precision <= 1.0
    assert likert.pairs is None
    store.close()
