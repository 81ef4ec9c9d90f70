"""Fixtures for the marketplace conformance suite.

Tests that only need the requester API take `api`, which is parametrized: the built-in marketplace
always, the real MTurk sandbox only with CAMPAIGN_MTURK_SANDBOX=1 and AWS credentials. Tests needing the
worker side or control over time take `market` (local only, ManualClock).

`market` and `api` are one test's requester account on a marketplace shared by the whole run
(`tests/support/market.py`: one server, one boto3 client); a test that stops, restarts or reconfigures
the server as a whole takes `fresh_market`, a marketplace of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest

from campaign.clock import ManualClock
from campaign.credentials import write_credentials_file
from campaign.market.server import RunningMarket, start_market
from campaign.market.worker_client import WorkerClient
from campaign.marketplaces.mturk_client import MarketClient, make_client
from tests.support.market import SharedMarket, SharedMarkets

HTML_NS = "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2011-11-11/HTMLQuestion.xsd"
PAGE = ('<!DOCTYPE html><html><body><form id="mturk_form" method="post" '
        'action="https://www.mturk.com/mturk/externalSubmit"><input type="hidden" id="assignmentId" name="assignmentId" value="">'
        '<input name="score"></form><script src="https://s3.amazonaws.com/mturk-public/externalHIT_v1.js"></script></body></html>')
QUESTION = f'<HTMLQuestion xmlns="{HTML_NS}"><HTMLContent><![CDATA[{PAGE}]]></HTMLContent><FrameHeight>0</FrameHeight></HTMLQuestion>'


def _sandbox_reason() -> str | None:
    if os.environ.get("CAMPAIGN_MTURK_SANDBOX") != "1":
        return "real MTurk sandbox run needs CAMPAIGN_MTURK_SANDBOX=1 and AWS credentials"
    if boto3.session.Session().get_credentials() is None:
        return "CAMPAIGN_MTURK_SANDBOX=1 but no AWS credentials are configured"
    return None


@dataclass
class Market:
    server: RunningMarket
    clock: ManualClock
    client: MarketClient
    workers: WorkerClient

    def hit(self, reward: str = "0.50", max_assignments: int = 3, lifetime: int = 3600, duration: int = 600,
            auto: int = 3600, **extra: Any) -> dict:
        t = self.client.call("create_hit_type", Title="Rate statements", Description="Judge importance",
                             Reward=reward, AssignmentDurationInSeconds=duration, AutoApprovalDelayInSeconds=auto,
                             **({"QualificationRequirements": extra.pop("quals")} if "quals" in extra else {}))
        return self.client.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], MaxAssignments=max_assignments,
                                LifetimeInSeconds=lifetime, Question=QUESTION, **extra)["HIT"]

    def work(self, hit_id: str, worker: str, answer: str = "3") -> str:
        self.workers.register(worker)
        aid = self.workers.accept(worker, hit_id)["AssignmentId"]
        self.workers.submit(aid, [("score", answer)])
        return aid


def _market(tmp_path: Path, mode: str = "sandbox", balance: str = "10000.00"):
    clock = ManualClock(1_800_000_000.0)
    server = start_market(tmp_path / "state", clock=clock, mode=mode, balance=Decimal(balance))
    # the requester side goes through a shared-credentials file, as `campaign market serve` writes it
    creds_file = tmp_path / "state" / "credentials"
    write_credentials_file(creds_file, "default", server.credentials)
    m = Market(server, clock, make_client("local", server.endpoint_url, credentials_file=creds_file, max_rps=0, max_attempts=2),
               WorkerClient(server.endpoint_url))
    return m


@pytest.fixture
def market(shared_market: SharedMarket) -> Iterator[Market]:
    """A requester account of its own on the shared marketplace; what it leaves behind is out of the
    next test's way (every HIT expired, faults off)."""
    yield from _account(shared_market)


@pytest.fixture
def fresh_market(tmp_path: Path) -> Iterator[Market]:
    """A marketplace of this test's own: for a test that stops or restarts it, or counts what is on it."""
    m = _market(tmp_path)
    yield m
    m.workers.close()
    m.server.stop()


def _account(shared: SharedMarket) -> Iterator[Market]:
    with shared.account() as (server, client):
        m = Market(server, shared.clock, client, WorkerClient(server.endpoint_url))
        try:
            yield m
        finally:
            m.workers.close()


@pytest.fixture
def prod_market(shared_markets: SharedMarkets) -> Iterator[Market]:
    """An account with $10.00 on a production-mode marketplace (money checked)."""
    yield from _account(shared_markets.get("prod", "10.00"))


@pytest.fixture(params=["local", pytest.param("sandbox", marks=pytest.mark.sandbox)])
def api(request, tmp_path: Path):
    """A MarketClient against the built-in marketplace or (opt-in) the real sandbox."""
    if request.param == "sandbox":
        reason = _sandbox_reason()
        if reason:
            pytest.skip(reason)
        yield make_client("mturk-sandbox", max_rps=2)
        return
    with request.getfixturevalue("shared_market").account() as (_, client):
        yield client
