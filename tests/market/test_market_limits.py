"""Requests MTurk refuses with a 4xx are refused here with a 4xx and change nothing; text is stored as given;
UpdateHITTypeOfHIT."""

from __future__ import annotations

import json
import urllib.request
from decimal import Decimal

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.market.conftest import QUESTION

BIG = "99999999999999999999"


def _no_retry_client(market):
    import boto3

    return boto3.client("mturk", region_name="us-east-1", endpoint_url=market.server.endpoint_url,
                        aws_access_key_id=market.server.credentials.access_key_id,
                        aws_secret_access_key=market.server.credentials.secret_access_key,
                        config=Config(retries={"mode": "standard", "max_attempts": 1}))


def _raw_call(market, op: str, body: dict) -> tuple[int, dict]:
    """The body exactly as given (boto3 cannot send an integer that does not fit 64 bits)."""
    from campaign.market.auth import sign_headers

    url, data, creds = market.server.endpoint_url + "/", json.dumps(body).encode(), market.server.credentials
    headers = sign_headers(url, data, {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": f"MTurkRequesterServiceV20170117.{op}"},
                           creds.access_key_id, creds.secret_access_key)
    req = urllib.request.Request(url, data=data, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.parametrize("op", ["create_hit_type", "create_hit"])
def test_huge_reward_is_a_validation_error_not_a_fault(market, op):
    raw = _no_retry_client(market)
    kw = {"Title": "t", "Description": "d", "Reward": BIG, "AssignmentDurationInSeconds": 60}
    if op == "create_hit":
        kw.update(LifetimeInSeconds=600, Question=QUESTION)
    with pytest.raises(ClientError) as ei:
        getattr(raw, op)(**kw)
    r = ei.value.response
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 400 and r["Error"]["Code"] == "ValidationException"
    assert f"Value '{BIG}' at 'reward'" in r["Error"]["Message"]
    assert r["ResponseMetadata"]["RetryAttempts"] == 0
    assert raw.list_hits()["NumResults"] == 0
    # The largest allowed reward works end to end, fees and all, without overflow.
    h = raw.create_hit(Title="t", Description="d", Reward="1000000.00", AssignmentDurationInSeconds=60,
                       LifetimeInSeconds=600, MaxAssignments=1_000_000_000, Question=QUESTION)["HIT"]
    assert h["Reward"] == "1000000.00"


def test_huge_bonus_and_huge_integers_are_validation_errors(market):
    h = market.hit(max_assignments=1)
    aid = market.work(h["HITId"], "ABONUSED")
    raw = _no_retry_client(market)
    with pytest.raises(ClientError) as ei:
        raw.send_bonus(WorkerId="ABONUSED", AssignmentId=aid, BonusAmount=BIG, Reason="r")
    assert ei.value.response["Error"]["Code"] == "ValidationException"
    assert raw.list_bonus_payments(AssignmentId=aid)["NumResults"] == 0
    qid = market.client.call("create_qualification_type", Name="q", Description="d",
                             QualificationTypeStatus="Active")["QualificationType"]["QualificationTypeId"]
    for op, body in (("AssociateQualificationWithWorker", {"QualificationTypeId": qid, "WorkerId": "ABONUSED", "IntegerValue": 10**20}),
                     ("CreateAdditionalAssignmentsForHIT", {"HITId": h["HITId"], "NumberOfAdditionalAssignments": 10**20}),
                     ("CreateAdditionalAssignmentsForHIT", {"HITId": h["HITId"], "NumberOfAdditionalAssignments": 1_000_000_000}),
                     ("ListHITs", {"NextToken": "eyJrIjogImhpdHMiLCAicyI6IDEwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMH0"})):
        status, body_out = _raw_call(market, op, body)
        assert status == 400 and body_out["__type"] in ("ValidationException", "RequestError"), (op, body_out)
    assert market.client.call("get_hit", HITId=h["HITId"])["HIT"]["MaxAssignments"] == 1
    assert market.client.call("list_workers_with_qualification_type", QualificationTypeId=qid)["NumResults"] == 0


def test_repeated_delete_of_a_disposed_hit_is_refused(market):
    h = market.hit(max_assignments=1)
    market.client.call("update_expiration_for_hit", HITId=h["HITId"], ExpireAt=0)
    market.client.call("delete_hit", HITId=h["HITId"])
    with pytest.raises(ClientError) as ei:
        market.client.call("delete_hit", HITId=h["HITId"])
    r = ei.value.response
    assert r["TurkErrorCode"] == "AWS.MechanicalTurk.InvalidHITState" and "'Disposed'" in r["Error"]["Message"]


def test_text_is_stored_and_returned_exactly_as_given(market):
    """Bidirectional overrides and markup are the worker pages' business to render inertly; the engine keeps them."""
    title = "Rate \u202egnp.exe\u202c <b>this</b> & \u200fthat"
    desc = "<script>alert(1)</script> \u2066isolated\u2069"
    t = market.client.call("create_hit_type", Title=title, Description=desc, Reward="0.10", AssignmentDurationInSeconds=60,
                           Keywords="\u202e, keyword")["HITTypeId"]
    h = market.client.call("create_hit_with_hit_type", HITTypeId=t, LifetimeInSeconds=600, Question=QUESTION,
                           RequesterAnnotation="\u202eitem-1")["HIT"]
    got = market.client.call("get_hit", HITId=h["HITId"])["HIT"]
    assert (got["Title"], got["Description"], got["Keywords"], got["RequesterAnnotation"]) == (
        title, desc, "\u202e, keyword", "\u202eitem-1")
    market.workers.register("AREADER")
    listed = market.workers.available("AREADER")
    assert [(x["Title"], x["Description"]) for x in listed] == [(title, desc)]


def test_update_hit_type_of_hit(prod_market):
    m = prod_market
    c = m.client
    h = m.hit(reward="0.10", max_assignments=2)
    new_type = c.call("create_hit_type", Title="Better paid", Description="d2", Reward="0.20",
                      AssignmentDurationInSeconds=600, AutoApprovalDelayInSeconds=3600)["HITTypeId"]
    aid = m.work(h["HITId"], "ATYPED")
    c.call("update_hit_type_of_hit", HITId=h["HITId"], HITTypeId=new_type)
    got = c.call("get_hit", HITId=h["HITId"])["HIT"]
    assert (got["HITTypeId"], got["Title"], got["Reward"]) == (new_type, "Better paid", "0.20")
    before = Decimal(c.call("get_account_balance")["AvailableBalance"])
    c.call("approve_assignment", AssignmentId=aid)
    assert before - Decimal(c.call("get_account_balance")["AvailableBalance"]) == Decimal("0.24")  # new reward + 20 %
    with pytest.raises(ClientError) as ei:
        c.call("update_hit_type_of_hit", HITId=h["HITId"], HITTypeId="3PR3LXCWSFNV4OJWZBHIMQOIJVSX9G")
    assert ei.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.InvalidParameterValue"
    with pytest.raises(ClientError) as ei:
        c.call("update_hit_type_of_hit", HITId="3PR3LXCWSFNV4OJWZBHIMQOIJVSX9G", HITTypeId=new_type)
    assert ei.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.HITDoesNotExist"
