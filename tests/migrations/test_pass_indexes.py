"""Migration 0006: the indexes of the per-pass statements (the posting step's drafts, close's count of a
HIT's decided answers, the quality pass's count of a stage's answers). A store of the previous release,
holding HITs and answers, is upgraded in place on SQLite and PostgreSQL; nothing stored changes, and
the statements then read through the new indexes (on PostgreSQL under a generic plan too, which is how
a daemon's prepared statements run once repeated)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import create_engine, func, inspect, text
from sqlmodel import col, select

from campaign.state import DECIDED, AssignmentStatus, HitStatus
from campaign.steps.post import pending_hits
from campaign.steps.quality_pass import COUNTED
from campaign.store import AssignmentRow, HitRow, Store, alembic_config, schema_head

PREVIOUS = "0005"
NEW_INDEXES = {"hits": {"ix_hits_campaign_pending"},
               "assignments": {"ix_assignments_campaign_hit_status", "ix_assignments_campaign_stage_status"}}
STATUSES = ["draft", "posting", "posted", "closed", "draft", "posting", "held", "failed"]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield request.getfixturevalue("pg_url") if request.param == "postgres" else f"sqlite:///{tmp_path / 'campaign.db'}"


def store_at_previous(url: str) -> list[tuple[Any, ...]]:
    """A store as the previous release leaves it (schema 0005), with HITs of every status in two
    campaigns and answers to them; returns its rows (hits, then assignments) as read back."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(url, conn), PREVIOUS)
            for camp in ("a", "b"):
                for i, status in enumerate(STATUSES):
                    conn.execute(text("INSERT INTO hits (campaign, stage, hit_key, batch, item_keys, annotation, token, token_attempt, "
                                      "status, reward, assignments, reserved) VALUES (:c, 'likert', :k, 0, '[]', :k, :k, 0, :s, '0.06', 3, '0.00')"),
                                 {"c": camp, "k": f"likert-{i:05d}", "s": status})
                    conn.execute(text("INSERT INTO assignments (assignment_id, campaign, stage, hit_key, hit_id, worker_id, status, answer_xml, "
                                      "valid, collected_at) VALUES (:a, :c, 'likert', :k, 'H', 'W', :s, '<a/>', true, 1.0)"),
                                 {"a": f"{camp}-{i}", "c": camp, "k": f"likert-{i:05d}", "s": "approved" if i % 2 else "submitted"})
        return rows(url)
    finally:
        engine.dispose()


def rows(url: str) -> list[tuple[Any, ...]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return ([tuple(r) for r in conn.execute(text("SELECT * FROM hits ORDER BY id"))]
                    + [tuple(r) for r in conn.execute(text("SELECT * FROM assignments ORDER BY assignment_id"))])
    finally:
        engine.dispose()


def test_a_store_of_the_previous_release_gets_the_indexes_and_keeps_its_rows(store_url: str, tmp_path: Path) -> None:
    before = store_at_previous(store_url)
    store = Store(store_url, tmp_path)
    try:
        assert store.schema_version() == schema_head()  # 0006 and any later one
        with store.engine.connect() as conn:
            for table, names in NEW_INDEXES.items():
                assert names <= {ix["name"] for ix in inspect(conn).get_indexes(table)}
        assert rows(store_url) == before
        with store.session() as s:  # what the statements find is what they found before the indexes
            assert [h.hit_key for h in s.exec(pending_hits("a", False, 500)).all()] == \
                ["likert-00000", "likert-00001", "likert-00004", "likert-00005"]
            assert [h.hit_key for h in s.exec(pending_hits("a", True, 500)).all()] == ["likert-00001", "likert-00005"]
            assert [h.hit_key for h in s.exec(pending_hits("a", False, 3)).all()] == ["likert-00000", "likert-00001", "likert-00004"]
            assert s.exec(select(func.count()).select_from(AssignmentRow).where(
                AssignmentRow.campaign == "a", AssignmentRow.stage == "likert", col(AssignmentRow.status).in_(COUNTED))).one() == 8
    finally:
        store.close()


def test_a_new_store_reads_its_drafts_through_the_partial_index_on_sqlite(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'campaign.db'}", tmp_path)
    try:
        with store.engine.connect() as conn:
            for only_interrupted in (False, True):
                plan = _sqlite_plan(conn, pending_hits("a", only_interrupted, 500))
                assert "ix_hits_campaign_pending" in plan, plan
            plan = _sqlite_plan(conn, _close_count())
            assert "ix_assignments_campaign_hit_status" in plan, plan
            plan = _sqlite_plan(conn, _stage_count())
            assert "COVERING INDEX ix_assignments_campaign_stage_status" in plan, plan
    finally:
        store.close()


@pytest.mark.postgres
def test_postgres_generic_plans_read_the_drafts_and_a_hits_answers_by_index(pg_url: str, tmp_path: Path) -> None:
    """The daemon's statements are prepared after a few calls, and PostgreSQL may then plan them once
    for any parameters (a generic plan); the partial index must still be provably usable then."""
    store = Store(pg_url, tmp_path)
    try:
        with store.engine.begin() as conn:
            conn.execute(HitRow.__table__.insert(), [  # type: ignore[attr-defined]
                {"campaign": f"c{c}", "stage": "likert", "hit_key": f"likert-{i:05d}", "item_keys": "[]", "annotation": f"{c}{i}",
                 "token": f"{c}{i}", "status": HitStatus.CLOSED if i % 50 else HitStatus.DRAFT, "reward": "0.06", "assignments": 3}
                for c in range(4) for i in range(2000)])
            conn.exec_driver_sql("ANALYZE hits")
            conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
            for only_interrupted in (False, True):
                plan = _pg_generic_plan(conn, pending_hits("c1", only_interrupted, 500))
                assert "ix_hits_campaign_pending" in plan and "hits_pkey" not in plan, plan
    finally:
        store.close()


def _close_count() -> Any:
    """The close step's candidates' count of decided answers, for HIT "likert-00001" of campaign "a"."""
    return select(func.count()).select_from(AssignmentRow).where(
        AssignmentRow.campaign == "a", AssignmentRow.hit_key == "likert-00001", col(AssignmentRow.status).in_((*DECIDED, AssignmentStatus.HELD)))


def _stage_count() -> Any:
    return select(func.count()).select_from(AssignmentRow).where(
        AssignmentRow.campaign == "a", AssignmentRow.stage == "likert", col(AssignmentRow.status).in_(COUNTED))


def _sqlite_plan(conn: Any, stmt: Any) -> str:
    sql = str(stmt.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
    return "\n".join(str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql).fetchall())


def _pg_generic_plan(conn: Any, stmt: Any) -> str:
    """EXPLAIN of the statement prepared with its bound parameters as $n, executed under the generic plan."""
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    sql, params = str(compiled), compiled.params
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", sql)))
    prepared = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m.group(1)) + 1}", sql)
    conn.exec_driver_sql(f"PREPARE pending AS {prepared}")
    try:
        args = ", ".join(str(params[n]) if isinstance(params[n], int) else "'" + str(params[n]).replace("'", "''") + "'" for n in names)
        return "\n".join(str(r[0]) for r in conn.exec_driver_sql(f"EXPLAIN EXECUTE pending({args})").fetchall())
    finally:
        conn.exec_driver_sql("DEALLOCATE pending")
