"""The MTurk implementation against the built-in marketplace in-process: an account of the test's own
with $100.00 on the run's shared production-mode marketplace (money checked), a worker client and the
marketplace's manual clock; over boto3 (as MTurk is spoken to) and over the client the daemon speaks
to the built-in marketplace with (`campaign.marketplaces.signed_json`), so each test holds for both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from campaign.clock import ManualClock
from campaign.market.worker_client import WorkerClient
from campaign.marketplaces.mturk import MTurkMarketplace
from campaign.marketplaces.mturk_client import RequesterClient
from campaign.marketplaces.signed_json import SignedJsonClient
from tests.support.market import SharedMarkets


@pytest.fixture(params=["boto3", "json"])
def local_mturk(request: pytest.FixtureRequest,
                shared_markets: SharedMarkets) -> Iterator[tuple[MTurkMarketplace, WorkerClient, ManualClock]]:
    shared = shared_markets.get("prod", "100.00")
    with shared.account() as (server, boto_client):
        client: RequesterClient = boto_client
        if request.param == "json":
            client = SignedJsonClient(server.endpoint_url, server.credentials, max_attempts=2)
        workers = WorkerClient(server.endpoint_url)
        try:
            yield MTurkMarketplace(client), workers, shared.clock
        finally:
            workers.close()
