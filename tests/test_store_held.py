"""A store written by the previous release (schema 0002, no `held` table) opens, migrates to the
version with held rows, and keeps everything it had."""

from __future__ import annotations

from alembic import command
from sqlalchemy import create_engine, inspect, text

from campaign.store import SCHEMA_HEAD, HeldRow, Store, alembic_config


def test_a_store_of_the_previous_release_migrates_to_held_rows(tmp_path):
    url = f"sqlite:///{tmp_path / 'campaign.db'}"
    engine = create_engine(url)
    with engine.begin() as conn:  # exactly what the previous release's schema was
        command.upgrade(alembic_config(url, conn), "0002")
        conn.execute(text("INSERT INTO campaigns (name, fingerprint, spec_json, status, seed, budget, created_at) "
                          "VALUES ('old', 'f', '{}', 'running', 1, '5.00', 1.0)"))
        conn.execute(text("INSERT INTO ledger (campaign, ref, kind, amount, fee, created_at) "
                          "VALUES ('old', 'reserve:h1', 'reserve', '0.72', '0.00', 1.0)"))
    assert "held" not in inspect(engine).get_table_names()
    engine.dispose()
    store = Store.open(tmp_path)
    try:
        assert store.schema_version() == SCHEMA_HEAD >= "0003"  # through held rows and on
        with store.session() as s:
            assert s.exec(text("SELECT name, status FROM campaigns")).all() == [("old", "running")]  # type: ignore[call-overload]
            assert s.exec(text("SELECT ref, amount FROM ledger")).all() == [("reserve:h1", "0.72")]  # type: ignore[call-overload]
            s.add(HeldRow(campaign="old", row_kind="assignment", row_key="A1", step="collect", error="E"))
        with store.session() as s:
            assert s.get(HeldRow, 1).status == "held"
    finally:
        store.close()
