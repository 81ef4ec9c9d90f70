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


# The slow tests that take longest (seconds on a loaded CI machine, 2026-11-29; the scale-out, pause,
# uncertain-pay and simulate tests scaled by how much faster they ran alone after that day's cuts), started
# first. xdist hands work out in collection order, and a 60-100 s test collected late
# (test_scaleout_postgres.py sorts near the end) ran alone while the other workers sat idle: the slow
# selection's tail, about a minute of CI. Only the order changes; a test missing from here runs after these,
# as before.
LONG_FIRST = {
    "tests/test_estimate_examples.py::test_estimate_is_within_five_percent_of_the_runs_spend[prolific": 55,
    "tests/test_scaleout_postgres.py::test_two_daemons_one_killed": 44,
    "tests/test_operations.py::test_pause_freezes_review": 32,
    "tests/prolific/test_real_road.py::": 28,
    "tests/prolific/test_uncertain_work.py::": 25,
    "tests/test_simulate.py::test_simulate_spends": 24,
    "tests/test_e2e_postgres.py::test_sigkill_at_random_instants": 24,
    "tests/bench/test_bench_scale_out.py::": 22,
    "tests/test_estimate_examples.py::test_estimate_is_within_five_percent_of_the_runs_spend[campaigns": 21,
    "tests/prolific/test_kill.py::test_sigkill_at_random_instants": 20,
    "tests/test_budget.py::test_budget_runs_out": 20,
    "tests/test_jsonout.py::test_bench_json_outputs_are_strict[nuggets]": 20,
}


def _expected_seconds(item: pytest.Item) -> int:
    return next((s for prefix, s in LONG_FIRST.items() if item.nodeid.startswith(prefix)), 0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist with `--dist loadgroup` (as .ci/run runs the slow tests): the tests of one module
    that share a module-scoped fixture (a campaign run, a browser) go to one worker, so it is made once;
    the longest tests go first (`LONG_FIRST`)."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        if any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
    items.sort(key=lambda item: -_expected_seconds(item))  # stable: the rest keep their order
