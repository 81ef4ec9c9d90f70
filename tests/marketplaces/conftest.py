"""The MTurk implementation against the built-in marketplace in-process: an account of the test's own
with $100.00 on the run's shared production-mode marketplace (money checked), a worker client and the
marketplace's manual clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from campaign.clock import ManualClock
from campaign.market.worker_client import WorkerClient
from campaign.marketplaces.mturk import MTurkMarketplace
from tests.support.market import SharedMarkets


@pytest.fixture
def local_mturk(shared_markets: SharedMarkets) -> Iterator[tuple[MTurkMarketplace, WorkerClient, ManualClock]]:
    shared = shared_markets.get("prod", "100.00")
    with shared.account() as (server, client):
        workers = WorkerClient(server.endpoint_url)
        try:
            yield MTurkMarketplace(client), workers, shared.clock
        finally:
            workers.close()
