"""A worker blocked in one campaign is not offered the HITs of campaigns that share the block list."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from campaign.clock import ManualClock
from campaign.market.server import start_market
from campaign.market.worker_client import WorkerClient
from campaign.marketplaces.mturk_client import make_client
from campaign.spec import load_spec
from campaign.steps.context import Context
from campaign.steps.quality_pass import sync_shared_blocks
from campaign.store import Store
from tests.support.specs import campaign, write_spec

QUESTION = ('<HTMLQuestion xmlns="http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2011-11-11/HTMLQuestion.xsd">'
            '<HTMLContent><![CDATA[<!DOCTYPE html><html><body><form><input name="x"></form></body></html>]]></HTMLContent>'
            '<FrameHeight>0</FrameHeight></HTMLQuestion>')


def _spec(tmp_path: Path, name: str, account_list: str) -> Path:
    return write_spec(tmp_path / f"{name}.yaml", campaign(name, topic="t", task={"kind": "likert"}, budget="10.00", crowd=None,
                                                         quality={"block": True, "block_list": account_list}, poll_interval=None))


def test_a_block_in_one_campaign_hides_the_other_campaigns_hits(tmp_path):
    market = start_market(tmp_path / "market", clock=ManualClock(), mode="sandbox")
    try:
        # two campaigns on two requester accounts that share the block list "lab"
        a = make_client("local", market.endpoint_url, credentials=market.add_account("ACCOUNTA"))
        b = make_client("local", market.endpoint_url, credentials=market.add_account("ACCOUNTB"))
        hits = {}
        for name, client in (("a", a), ("b", b)):
            t = client.call("create_hit_type", Title=f"HIT {name}", Description="d", Reward="0.06",
                            AssignmentDurationInSeconds=600)
            hits[name] = client.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], MaxAssignments=5,
                                     LifetimeInSeconds=3600, Question=QUESTION)["HIT"]["HITId"]
        workers = WorkerClient(market.endpoint_url)
        workers.register("ASPAMMER1")
        assert {h["HITId"] for h in workers.available("ASPAMMER1")} == set(hits.values())

        store = Store.open(tmp_path / "state")
        load_spec(_spec(tmp_path, "camp-a", "lab")).campaigns[0]
        spec_b = load_spec(_spec(tmp_path, "camp-b", "lab")).campaigns[0]
        # campaign A blocked the worker (as block_workers records it)
        a.call("create_worker_block", WorkerId="ASPAMMER1", Reason="failed 3 of 3 check statements")
        store.event("camp-a", "worker_blocked", "ASPAMMER1: spam", subject="ASPAMMER1", data={"block_list": "lab"})
        assert {h["HITId"] for h in workers.available("ASPAMMER1")} == {hits["b"]}

        ctx_b = Context(store=store, market=b, campaign=spec_b, seed=0, state_dir=tmp_path / "state",
                        clock=ManualClock(), instance="x", lock=threading.Lock())
        sync_shared_blocks(ctx_b)
        assert workers.available("ASPAMMER1") == []
        sync_shared_blocks(ctx_b)  # idempotent: the block is not sent twice
        assert json.loads(store.get_kv("camp-b", "shared_blocks")) == ["ASPAMMER1"]
        workers.register("AGOODONE1")
        assert {h["HITId"] for h in workers.available("AGOODONE1")} == set(hits.values())
        store.close()
    finally:
        market.stop()
