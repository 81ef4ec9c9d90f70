"""The marketplace's request handling without a socket: `MarketApp` and `ContentApp` take whole requests."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from campaign.clock import ManualClock
from campaign.market import auth
from campaign.market.accounts import Accounts
from campaign.market.db import Database
from campaign.market.engine import Engine
from campaign.market.faults import FaultConfig, Faults
from campaign.market.server import ContentApp, Core, MarketApp
from campaign.market.worker_site import ContentSite, SiteConfig, WorkerSite
from campaign.web.request import Refusal, Request, RequestHeaders

URL = "http://127.0.0.1:9"


@pytest.fixture
def apps(tmp_path):
    db, accounts = Database(tmp_path), Accounts(tmp_path)
    creds = accounts.ensure_account("default")
    engine = Engine(db, ManualClock(), mode="sandbox", balance=Decimal("10000.00"))
    cfg = SiteConfig()
    cfg.worker_origin, cfg.content_origin = URL, "http://127.0.0.1:10"
    site = WorkerSite(engine, accounts, cfg)
    core = Core(engine, Faults(FaultConfig()), accounts, site, ContentSite(engine, cfg, site))
    yield MarketApp(core), ContentApp(core), creds
    accounts.close()
    db.close()


def _req(method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b"") -> Request:
    return Request(method, path, "", RequestHeaders(list((headers or {}).items())), body, "127.0.0.1")


def test_health_and_unknown_paths(apps):
    market, content, _ = apps
    assert market.handle(_req("GET", "/health")).body == b'{"ok": true}'
    assert market.handle(_req("GET", "/nowhere")).status == 404
    assert content.handle(_req("GET", "/nowhere")).status == 404


def test_the_requester_api_verifies_signatures_and_answers_signed_calls(apps):
    market, _, creds = apps
    body = b"{}"
    headers = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "MTurkRequesterServiceV20170117.GetAccountBalance"}
    unsigned = market.handle(_req("POST", "/", headers, body))
    assert unsigned.status == 403 and json.loads(unsigned.body)["__type"] == "MissingAuthenticationToken"
    signed = auth.sign_headers(URL + "/", body, headers, creds.access_key_id, creds.secret_access_key)
    answer = market.handle(_req("POST", "/", {"Host": "127.0.0.1:9", **signed}, body))
    assert answer.status == 200 and json.loads(answer.body)["AvailableBalance"] == "10000.00"


def test_refusals_keep_each_origins_error_shape(apps):
    market, content, _ = apps
    api = market.refuse("POST", "/", Refusal(400, "BadRequest", "Malformed HTTP request."))
    assert api.status == 400 and json.loads(api.body)["__type"].endswith("SerializationException") and api.close
    page = market.refuse("GET", "/worker", Refusal(408, "RequestTimeout", "slow"))
    assert json.loads(page.body) == {"error": "RequestTimeout", "message": "slow"}
    assert json.loads(content.refuse("POST", "/mturk/externalSubmit", Refusal(411, "LengthRequired", "x")).body)["error"] == "LengthRequired"
