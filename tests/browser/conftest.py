"""A real browser for the worker site: Debian's chromium driven by its chromedriver through Selenium.

The browser tests must run wherever CI runs: with CI set and no chromium they fail (not skip); on a
developer machine without chromium they skip with the reason. Paths can be overridden with
CAMPAIGN_CHROMIUM / CAMPAIGN_CHROMEDRIVER.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from campaign.clock import ManualClock
from campaign.market.server import RunningMarket, start_market
from campaign.marketplaces.mturk_client import MarketClient, make_client

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1280,1000")


def _find(env: str, *names: str) -> str | None:
    given = os.environ.get(env)
    if given:
        return given if Path(given).exists() else None
    for n in names:
        found = shutil.which(n) or (n if Path(n).exists() else None)
        if found:
            return found
    return None


def _ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def browser_paths() -> tuple[str, str]:
    chromium = _find("CAMPAIGN_CHROMIUM", "/usr/bin/chromium", "chromium", "chromium-browser")
    driver = _find("CAMPAIGN_CHROMEDRIVER", "/usr/bin/chromedriver", "chromedriver")
    if not chromium or not driver:
        reason = f"browser tests need Debian's chromium and chromium-driver (found chromium={chromium}, chromedriver={driver})"
        if _ci():
            pytest.fail("CI is set but " + reason, pytrace=False)
        pytest.skip(reason)
    return chromium, driver


@pytest.fixture(scope="module")
def driver(browser_paths: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, chromedriver = browser_paths
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    d = webdriver.Chrome(service=Service(executable_path=chromedriver), options=opts)
    d.set_page_load_timeout(60)
    try:
        yield d
    finally:
        d.quit()


class Browsed:
    """The marketplace under test and a requester client on its own account."""

    def __init__(self, server: RunningMarket, client: MarketClient) -> None:
        self.server = server
        self.client = client


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browsed]:
    server = start_market(tmp_path_factory.mktemp("browser-market"), clock=ManualClock(1_800_000_000.0),
                          balance=Decimal("10000.00"))
    client = make_client("local", server.endpoint_url, credentials=server.credentials, max_rps=0, max_attempts=2)
    try:
        yield Browsed(server, client)
    finally:
        server.stop()
