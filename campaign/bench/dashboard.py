"""`campaign bench dashboard`: how long one dashboard redraw takes on a large campaign.

Builds a store holding a campaign of `--hits` HITs (default 20,000) with five assignments each, their
judgments and ledger entries, then times `collect_figures` (the store queries) and the Rich render of
the result, over several redraws. Target: a redraw under 200 ms.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console

from campaign.dashboard.figures import collect_figures
from campaign.dashboard.view import build
from campaign.store import Store


def populate(store: Store, hits: int, assignments: int = 5) -> None:
    """Bulk rows through the engine's own connection (executemany), in a few seconds for 20k HITs."""
    from campaign.store import AssignmentRow, CampaignRow, EventRow, HitRow, JudgmentRow, LedgerRow, WorkerRow

    now = time.time()
    with store.engine.begin() as conn:
        conn.execute(CampaignRow.__table__.insert(), [{"name": "big", "fingerprint": "x", "spec_json": "{}", "status": "running",
                                                        "seed": 0, "budget": "100000.00", "created_at": now}])
        conn.execute(HitRow.__table__.insert(), [
            {"campaign": "big", "stage": "likert", "hit_key": f"likert-{i:06d}", "batch": 0, "item_keys": "[]",
             "annotation": f"a{i}", "token": f"t{i}", "token_attempt": 0,
             "status": "closed" if i < hits * 0.6 else "posted", "reward": "0.06", "assignments": assignments,
             "reserved": "0.35"} for i in range(hits)])
        a_rows, j_rows, l_rows = [], [], []
        for i in range(hits):
            l_rows.append({"campaign": "big", "ref": f"reserve:likert-{i:06d}", "kind": "reserve", "amount": "0.35", "fee": "0.00",
                           "hit_key": f"likert-{i:06d}", "created_at": now})
            for k in range(assignments if i < hits * 0.8 else 2):
                aid = f"A{i:08d}{k}"
                status = "approved" if i < hits * 0.6 else "submitted"
                a_rows.append({"assignment_id": aid, "campaign": "big", "stage": "likert", "hit_key": f"likert-{i:06d}",
                               "hit_id": f"H{i}", "worker_id": f"W{(i * 7 + k) % 900}", "status": status, "answer_xml": "",
                               "valid": True, "collected_at": now - (i % 1200)})
                j_rows.extend({"campaign": "big", "stage": "likert", "assignment_id": aid, "worker_id": f"W{(i * 7 + k) % 900}",
                               "item_key": f"p{(i * 5 + m) % 50000}", "value": float(1 + (i + m + k) % 5), "excluded": False}
                              for m in range(5))
                if status == "approved":
                    l_rows.append({"campaign": "big", "ref": f"charge:{aid}", "kind": "charge", "amount": "0.07", "fee": "0.01",
                                   "hit_key": f"likert-{i:06d}", "assignment_id": aid, "created_at": now})
        conn.execute(AssignmentRow.__table__.insert(), a_rows)
        conn.execute(JudgmentRow.__table__.insert(), j_rows)
        conn.execute(LedgerRow.__table__.insert(), l_rows)
        conn.execute(WorkerRow.__table__.insert(), [{"campaign": "big", "worker_id": f"W{w}", "first_seen": now, "assignments": 100,
                                                     "excluded": w % 50 == 0, "blocked": False,
                                                     "reason": "low correlation" if w % 50 == 0 else None} for w in range(900)])
        conn.execute(EventRow.__table__.insert(), [{"campaign": "big", "ts": now, "level": "info", "kind": "posted",
                                                    "message": f"event {e}"} for e in range(2000)])


def measure(store: Store, redraws: int) -> dict:
    console = Console(file=io.StringIO(), width=160)
    query_ms, render_ms = [], []
    for _ in range(redraws):
        t0 = time.perf_counter()
        figures = collect_figures(store)
        t1 = time.perf_counter()
        console.print(build(figures))
        t2 = time.perf_counter()
        query_ms.append((t1 - t0) * 1000)
        render_ms.append((t2 - t1) * 1000)
    total = [q + r for q, r in zip(query_ms, render_ms)]
    return {"query_ms": round(statistics.median(query_ms), 1), "render_ms": round(statistics.median(render_ms), 1),
            "redraw_ms_median": round(statistics.median(total), 1), "redraw_ms_max": round(max(total), 1)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="campaign bench dashboard", description=__doc__)
    ap.add_argument("--hits", type=int, default=20000)
    ap.add_argument("--redraws", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp))
        t0 = time.perf_counter()
        populate(store, args.hits)
        fill_s = time.perf_counter() - t0
        result = {"hits": args.hits, "assignments": None, "populate_seconds": round(fill_s, 1), **measure(store, args.redraws)}
        result["assignments"] = collect_figures(store)["campaigns"][0]["assignments"]["submitted"]
        store.close()
    result["target_ms"] = 200
    result["meets_target"] = result["redraw_ms_max"] < 200
    if args.json:
        print(json.dumps(result))
    else:
        print(f"dashboard on {result['hits']} HITs / {result['assignments']} assignments: "
              f"redraw median {result['redraw_ms_median']} ms (queries {result['query_ms']} ms, render {result['render_ms']} ms), "
              f"max {result['redraw_ms_max']} ms; target < 200 ms: {'met' if result['meets_target'] else 'NOT met'}")
    return 0
