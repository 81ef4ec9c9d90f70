"""The per-pass statements that grew with the tables (docs/scale.md, "Per-pass statements"), timed on a
store at the size of the 94,000-proposition bench: 8 campaigns x 2,350 HITs of 5 answers, mid-run
(campaign scale003 posted every HIT, `--open` of them still collecting, one answer of each undecided;
the other seven still have half their HITs to post).

    python benchmarks/pass_statements.py --db postgres [--open 800] [--vacuum]
    python benchmarks/pass_statements.py --db sqlite
    PYTHONPATH=DIR python benchmarks/pass_statements.py ...   # another checkout's code (git archive)

Each statement runs 60 times in one session, with its parameters bound as the daemon binds them:
psycopg prepares a statement from its fifth call on, and PostgreSQL may then plan it once for any
parameters (a generic plan), so the median of the last 40 calls is what a daemon pays a pass. The
plans shown: on PostgreSQL the generic plan (EXPLAIN ANALYZE EXECUTE under plan_cache_mode =
force_generic_plan), on SQLite EXPLAIN QUERY PLAN.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import tempfile
import time
from typing import Any

from sqlalchemy import and_, func, insert, or_
from sqlmodel import Session, col, select

import campaign
from campaign.state import DECIDED, AssignmentStatus, HitStatus
from campaign.steps.quality_pass import COUNTED
from campaign.store import AssignmentRow, HitRow, Store

NAME = "scale003"


def fill(store: Store, open_hits: int, vacuum: bool, campaigns: int = 8, hits: int = 2350, slots: int = 5) -> tuple[int, int]:
    rnd = random.Random(0)
    hrows, arows = [], []
    for c in range(campaigns):
        name = f"scale{c:03d}"
        for h in range(hits):
            hk = f"likert-{h:05d}"
            draft = name != NAME and h >= hits // 2
            late = not draft and h >= hits - open_hits
            hrows.append({"campaign": name, "stage": "likert", "hit_key": hk, "item_keys": json.dumps([f"p{h * 5 + i}" for i in range(5)]),
                          "annotation": f"{name}/{hk}", "token": f"{name}/{hk}", "reward": "0.06", "assignments": slots,
                          "status": HitStatus.DRAFT if draft else HitStatus.POSTED if late else HitStatus.CLOSED,
                          "hit_id": None if draft else f"H{c}{h:07d}", "expires_at": 1e12})
            n = 0 if draft else rnd.randint(0, slots) if late else slots
            for a in range(n):
                status = AssignmentStatus.SUBMITTED if late and a == n - 1 else AssignmentStatus.APPROVED
                arows.append({"assignment_id": f"A{c}-{h}-{a}", "campaign": name, "stage": "likert", "hit_key": hk,
                              "hit_id": f"H{c}{h:07d}", "worker_id": f"W{rnd.randint(0, 3000)}", "status": status,
                              "answer_xml": "<a>" + "y" * 200 + "</a>", "collected_at": 2.0 + h})
    with store.engine.begin() as conn:
        for table, rows in ((HitRow.__table__, hrows), (AssignmentRow.__table__, arows)):  # type: ignore[attr-defined]
            for i in range(0, len(rows), 5000):
                conn.execute(insert(table), rows[i:i + 5000])
        conn.exec_driver_sql("ANALYZE")
    if vacuum and store.engine.dialect.name == "postgresql":
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
    return len(hrows), len(arows)


def statements() -> dict[str, Any]:
    """The statements as the checkout under test writes them (the posting step's from its own code)."""
    try:
        from campaign.steps.post import pending_hits  # type: ignore[attr-defined]
        drafts, interrupted = pending_hits(NAME, False, 500), pending_hits(NAME, True, 500)
    except ImportError:  # before: the statuses as parameters
        def pending(statuses: tuple[str, ...]) -> Any:
            return select(HitRow).where(HitRow.campaign == NAME, col(HitRow.status).in_(statuses)).order_by(col(HitRow.id)).limit(500)
        drafts, interrupted = pending((HitStatus.DRAFT, HitStatus.POSTING)), pending((HitStatus.POSTING,))
    n_decided = (select(func.count()).select_from(AssignmentRow)
                 .where(AssignmentRow.campaign == HitRow.campaign, AssignmentRow.hit_key == HitRow.hit_key,
                        col(AssignmentRow.status).in_((*DECIDED, AssignmentStatus.HELD))).scalar_subquery())
    return {
        "post_pending: drafts": drafts,
        "post_pending: interrupted only": interrupted,
        "close: HITs that may close": select(HitRow).where(
            HitRow.campaign == NAME, HitRow.status == HitStatus.POSTED,
            or_(and_(col(HitRow.expires_at).is_not(None), col(HitRow.expires_at) <= 1e9), n_decided >= col(HitRow.assignments))).order_by(col(HitRow.id)),
        "quality: count of a stage's answers": select(func.count()).select_from(AssignmentRow).where(
            AssignmentRow.campaign == NAME, AssignmentRow.stage == "likert", col(AssignmentRow.status).in_(COUNTED)),
    }


def plan(conn: Any, stmt: Any) -> list[str]:
    if conn.dialect.name != "postgresql":
        sql = str(stmt.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
        return [str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql).fetchall()]
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    sql, params = str(compiled), compiled.params
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", sql)))
    prepared = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m.group(1)) + 1}", sql)
    args = ", ".join(str(params[n]) if isinstance(params[n], (int, float)) else "'" + str(params[n]) + "'" for n in names)
    conn.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
    conn.exec_driver_sql(f"PREPARE stmt AS {prepared}")
    try:
        return [str(r[0]) for r in conn.exec_driver_sql(f"EXPLAIN (ANALYZE) EXECUTE stmt({args})" if names else "EXPLAIN (ANALYZE) EXECUTE stmt").fetchall()]
    finally:
        conn.exec_driver_sql("DEALLOCATE stmt")
        conn.exec_driver_sql("RESET plan_cache_mode")


def run(url: str, open_hits: int, vacuum: bool) -> None:
    store = Store(url, tempfile.mkdtemp())
    started = time.perf_counter()
    n_hits, n_answers = fill(store, open_hits, vacuum)
    print(f"code {campaign.__file__}; {store.engine.dialect.name}: {n_hits} HITs, {n_answers} answers "
          f"({time.perf_counter() - started:.1f} s to fill); {NAME}: {open_hits} HITs open")
    for label, stmt in statements().items():
        with Session(store.engine) as s:
            times = []
            for _ in range(60):
                t = time.perf_counter()
                rows = s.exec(stmt).all()
                times.append((time.perf_counter() - t) * 1000)
            print(f"\n{label}: {statistics.median(times[-40:]):.2f} ms a call (median of calls 21-60; "
                  f"first 5: {statistics.median(times[:5]):.2f} ms), {len(rows)} rows")
            for line in plan(s.connection(), stmt):
                print("   ", line)
    store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", choices=("sqlite", "postgres"), default="postgres")
    ap.add_argument("--open", type=int, default=40, help="HITs of the measured campaign still collecting")
    ap.add_argument("--vacuum", action="store_true", help="VACUUM ANALYZE the PostgreSQL store first (visibility map set)")
    args = ap.parse_args()
    if args.db == "postgres":
        from campaign.bench.pgserver import pg_server

        with pg_server(preload=False) as server:
            run(server.create_database(), args.open, args.vacuum)
    else:
        run(f"sqlite:///{tempfile.mkdtemp()}/campaign.db", args.open, args.vacuum)


if __name__ == "__main__":
    main()
