"""Fixtures shared across the test tree."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pg import PgServer, pg_server


@pytest.fixture(scope="session")
def pg_server_session() -> Iterator[PgServer]:
    """One throw-away PostgreSQL server for the whole session (started on first use)."""
    try:
        with pg_server() as server:
            yield server
    except RuntimeError as exc:
        pytest.fail(f"cannot start PostgreSQL for a @pytest.mark.postgres test: {exc}")


@pytest.fixture
def pg_url(pg_server_session: PgServer) -> str:
    """A fresh empty database on the test server, as a SQLAlchemy URL (postgresql+psycopg://...)."""
    return pg_server_session.create_database()
