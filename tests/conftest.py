"""Fixtures shared across the test tree."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from campaign.spec import ADVERSARIES_ENV
from tests.pg import PgServer, pg_server
from tests.support.market import SharedMarket, SharedMarkets


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--adversaries", type=float, default=None, metavar="SHARE",
                     help="every simulated crowd of every test has this share of adversaries (crowd.adversaries; "
                          "sets CAMPAIGN_ADVERSARIES, so `campaign run` in child processes gets it too)")


def pytest_configure(config: pytest.Config) -> None:
    share = config.getoption("--adversaries")
    if share is not None:
        os.environ[ADVERSARIES_ENV] = str(share)
    _hear_ctrl_c()


def _hear_ctrl_c() -> None:
    """Tests press Ctrl-C (SIGINT) on the programs they start, as a person at a terminal would. A shell
    starts a background job (`pytest ... &`, as CI's script does) with SIGINT ignored, every child inherits
    that, and Python keeps an inherited SIG_IGN: the program never hears the Ctrl-C and the test waits out
    its bound. With Python's own handler here, a child starts with SIGINT at its default again."""
    try:
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread: nothing to restore from here
        pass


@pytest.fixture(scope="session")
def pg_server_session() -> Iterator[PgServer]:
    """One throw-away PostgreSQL server for the whole session (started on first use)."""
    try:
        with pg_server() as server:
            yield server
    except RuntimeError as exc:
        pytest.fail(f"cannot start PostgreSQL for a @pytest.mark.postgres test: {exc}")


@pytest.fixture(scope="session")
def shared_markets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedMarkets]:
    """The built-in marketplaces the run shares (tests/support/market.py): `.get(mode, balance)` starts one
    on first use; a test takes an account of its own on it with `.account()`."""
    markets = SharedMarkets(tmp_path_factory.mktemp("shared-markets"))
    yield markets
    markets.close()


@pytest.fixture(scope="session")
def shared_market(shared_markets: SharedMarkets) -> SharedMarket:
    """Sandbox mode (money not checked), $10,000.00 an account."""
    return shared_markets.get()


@pytest.fixture(scope="session")
def shared_prod_market(shared_markets: SharedMarkets) -> SharedMarket:
    """Production mode (money checked), $10,000.00 an account."""
    return shared_markets.get("prod")


@pytest.fixture
def pg_url(pg_server_session: PgServer) -> str:
    """A fresh empty database on the test server, as a SQLAlchemy URL (postgresql+psycopg://...)."""
    return pg_server_session.create_database()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist with `--dist loadgroup` (as .ci/run runs the slow tests): the tests of one module
    that share a module-scoped fixture (a campaign run, a browser) go to one worker, so it is made once."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        if any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
