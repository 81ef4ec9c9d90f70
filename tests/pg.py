"""A throw-away PostgreSQL server for tests: `initdb` into a temporary folder, started on a free loopback port.

The server itself is campaign.bench.pgserver (the scale bench starts one too). Used through the fixtures
in tests/conftest.py: `pg_server` (one per test session) and `pg_url` (a fresh, empty database on it per
test, as a SQLAlchemy URL `postgresql+psycopg://...`). Tests using them are marked `postgres` and must
run in CI, so a machine without the server binaries fails them, saying so, instead of skipping.
"""

from __future__ import annotations

from campaign.bench.pgserver import PgServer, find_bindir, pg_server

__all__ = ["PgServer", "find_bindir", "pg_server"]
