"""Alembic's environment: runs the store's migrations on the connection `campaign.store` hands over."""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection
from sqlmodel.sql.sqltypes import AutoString

from campaign.store import STORE_TABLES, metadata


def _include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    # SQLModel keeps one metadata for the whole process; only the store's own tables are migrated here.
    if type_ == "table":
        return name in STORE_TABLES
    return True


def _render_item(type_: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    # SQLModel's AutoString is a plain VARCHAR; rendered as such, revisions need no sqlmodel import.
    if type_ == "type" and isinstance(obj, AutoString):
        return "sa.String()"
    return False


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=metadata(), include_object=_include,
                      render_as_batch=connection.dialect.name == "sqlite", compare_type=True,
                      render_item=_render_item)
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    config = context.config
    if context.is_offline_mode():
        context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=metadata(),
                          include_object=_include, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(str(config.get_main_option("sqlalchemy.url")))
    try:
        with engine.begin() as conn:
            _run(conn)
    finally:
        engine.dispose()


main()
