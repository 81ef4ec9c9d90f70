"""What the scale benches measure of a finished run: memory of a process tree, sizes on disk, the
marketplace's approvals before review, and the percentiles of step timings. Shared by the single-daemon
bench (`campaign.bench.scale`) and the several-daemons one (`campaign.bench.scale_out`)."""

from __future__ import annotations

import os
import sqlite3
import statistics
from pathlib import Path

ITEMS_PER_HIT = 5  # the generated Likert campaign: propositions per HIT
ASSIGNMENTS = 5  # and judgments per HIT


def dir_mib(path: Path) -> float:
    if not path.exists():
        return 0.0
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def market_auto_approved(db: Path) -> int:
    """Assignments the built-in marketplace approved by itself: it stamps those with their
    AutoApprovalTime as the approval time. Counted on the marketplace's side, so no daemon code path
    (collect, review's read-back) can hide one."""
    if not db.is_file():
        return 0
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT COUNT(*) FROM assignments WHERE status = 'Approved' "
                               "AND approval_time = auto_approval_time").fetchone()[0])
    finally:
        con.close()


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out.extend(int(c) for c in fh.read().split())
    except OSError:
        pass
    return out


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return float(statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1])


def step_figures(step_ms: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Each step's durations over every campaign's passes, the steps that took time first: whether a
    pass grows with the new work (collect, review, post) or with the campaign (what should stay flat)."""
    merged: dict[str, list[float]] = {}
    for per in step_ms.values():
        for step, ms in per.items():
            merged.setdefault(step, []).extend(float(t) for t in ms)
    rows = {step: {"p50": percentile(ms, 50) or 0.0, "p99": percentile(ms, 99) or 0.0, "total_s": round(sum(ms) / 1000, 2)}
            for step, ms in merged.items() if ms}
    return dict(sorted(rows.items(), key=lambda kv: (-kv[1]["total_s"], kv[0])))
