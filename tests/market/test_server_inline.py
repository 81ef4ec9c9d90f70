"""Which requests the marketplace runs on the server's event loop (`MarketApp.inline`): all of them, except
while the fault switch adds latency, whose sleep must run on a worker thread so that it does not hold up
every other connection."""

from __future__ import annotations

import threading
import time
import urllib.request

from campaign.bench.market_client import SignedClient
from campaign.market.faults import FaultConfig
from campaign.market.server import ContentApp, MarketApp, start_market
from campaign.web.request import Request, RequestHeaders


def _request(path: str) -> Request:
    return Request("GET", path, "", RequestHeaders([]), b"", "127.0.0.1")


def test_requests_run_inline_only_without_fault_latency(tmp_path):
    market = start_market(tmp_path / "m")
    try:
        core = market.core
        for cls in (MarketApp, ContentApp):
            app = cls(core)
            assert app.inline(_request("/health"))
            core.faults.set(FaultConfig(latency_ms=50))
            assert not app.inline(_request("/health"))
            core.faults.set(FaultConfig())
    finally:
        market.stop()


def test_a_call_sleeping_for_fault_latency_does_not_hold_up_other_connections(tmp_path):
    market = start_market(tmp_path / "m", faults=FaultConfig(latency_ms=1500))
    try:
        client = SignedClient(market.endpoint_url, market.credentials)
        slow_done: list[float] = []
        t0 = time.monotonic()
        slow = threading.Thread(target=lambda: (client.call("GetAccountBalance"), slow_done.append(time.monotonic())))
        slow.start()
        time.sleep(0.2)  # the signed call is now sleeping in the server
        with urllib.request.urlopen(market.endpoint_url + "/health", timeout=10) as resp:
            assert resp.status == 200
        health_at = time.monotonic()
        slow.join(10)
        assert slow_done, "the slow call did not finish"
        assert health_at < slow_done[0]  # /health was answered while the slow call still slept
        assert slow_done[0] - t0 >= 1.5  # and that call did sleep (the latency is in force)
    finally:
        market.stop()
