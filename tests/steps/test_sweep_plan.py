"""Collect's sweep reads a page of a campaign's open HITs at a cost set by that campaign's open HITs,
never by the table: under the generic plan PostgreSQL gives a daemon's prepared statements, "the first
200 in id order" walked the primary key through every campaign's HITs. The index it reads instead comes
with migration 0007; a store of the previous release gets it in place."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.state import HitStatus
from campaign.steps.collect import open_hits_after
from campaign.store import HitRow, Store
from tests.migrations.test_pass_indexes import _pg_generic_plan

ROWS = [{"campaign": f"c{c}", "stage": "likert", "hit_key": f"likert-{i:05d}", "item_keys": "[]", "annotation": f"{c}{i}",
         "token": f"{c}{i}", "status": HitStatus.POSTED if i % 3 else HitStatus.CLOSED, "reward": "0.06", "assignments": 3}
        for i in range(2000) for c in range(8)]  # campaigns planned side by side: their HITs interleave by id


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else f"sqlite:///{tmp_path / 'campaign.db'}"
    s = Store(url, tmp_path)
    with s.engine.begin() as conn:
        conn.execute(HitRow.__table__.insert(), ROWS)  # type: ignore[attr-defined]
    yield s
    s.close()


def test_a_page_is_the_next_open_hits_in_id_order(store: Store) -> None:
    with store.session() as s:
        ids = {key: hid for hid, key in s.exec(HitRow.__table__.select().with_only_columns(  # type: ignore[attr-defined]
            HitRow.__table__.c.id, HitRow.__table__.c.hit_key).where(HitRow.__table__.c.campaign == "c3")).all()}
        want = [k for k in sorted(ids, key=ids.get) if int(k[-5:]) % 3]
        page = s.exec(open_hits_after("c3", 0, None, 5)).all()
        assert [key for _, key, _ in page] == want[:5] and all(slots == 3 for _, _, slots in page)
        after = s.exec(open_hits_after("c3", page[-1][0], None, 5)).all()
        assert [key for _, key, _ in after] == want[5:10]
        assert [key for _, key, _ in s.exec(open_hits_after("c3", -1, page[1][0], 100)).all()] == want[:2]


@pytest.mark.postgres
def test_postgres_generic_plan_reads_the_campaigns_open_hits_not_the_primary_key(pg_url: str, tmp_path: Path) -> None:
    store = Store(pg_url, tmp_path)
    with store.engine.begin() as conn:
        conn.execute(HitRow.__table__.insert(), ROWS)  # type: ignore[attr-defined]
        conn.exec_driver_sql("ANALYZE hits")
        conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
        plan = _pg_generic_plan(conn, open_hits_after("c3", 100, None, 200))
        assert "hits_pkey" not in plan and "ix_hits_campaign_status_id" in plan, plan
    store.close()


@pytest.mark.parametrize("url_kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_store_of_the_previous_release_gets_the_sweep_index_and_keeps_its_rows(request: pytest.FixtureRequest, tmp_path: Path,
                                                                                   url_kind: str) -> None:
    from alembic import command
    from sqlalchemy import create_engine, inspect

    from campaign.store import alembic_config, schema_head
    from tests.migrations.test_pass_indexes import rows

    url = request.getfixturevalue("pg_url") if url_kind == "postgres" else f"sqlite:///{tmp_path / 'campaign.db'}"
    engine = create_engine(url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(url, conn), "0006")
        conn.execute(HitRow.__table__.insert(), ROWS[:40])  # type: ignore[attr-defined]
    engine.dispose()
    before = rows(url)
    store = Store(url, tmp_path)
    try:
        assert store.schema_version() == schema_head() == "0007"
        with store.engine.connect() as conn:
            assert "ix_hits_campaign_status_id" in {ix["name"] for ix in inspect(conn).get_indexes("hits")}
        assert rows(url) == before
    finally:
        store.close()
