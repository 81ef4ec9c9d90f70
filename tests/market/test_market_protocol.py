"""Wire protocol and input validation: MTurk's error shapes, and a server that keeps serving after bad input."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from botocore.exceptions import ClientError, ParamValidationError

from tests.market.conftest import QUESTION


def _raw(market, body: bytes, target: str | None = "MTurkRequesterServiceV20170117.GetAccountBalance") -> tuple[int, dict, dict]:
    """A hand-made request, signed with the marketplace's own account (botocore's signer)."""
    from campaign.market.auth import sign_headers

    url = market.server.endpoint_url
    creds = market.server.credentials
    headers = {"Content-Type": "application/x-amz-json-1.1"}
    if target:
        headers["X-Amz-Target"] = target
    headers = sign_headers(url + "/", body, headers, creds.access_key_id, creds.secret_access_key)
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), dict(e.headers)


def _err(exc: ClientError) -> tuple[str, str, str]:
    r = exc.response
    return r["Error"]["Code"], r.get("TurkErrorCode", ""), r["Error"]["Message"]


def test_reward_with_three_decimals_is_a_validation_exception(api):
    with pytest.raises(ClientError) as ei:
        api.call("create_hit_type", Title="t", Description="d", Reward="0.065", AssignmentDurationInSeconds=60)
    code, _, msg = _err(ei.value)
    assert code == "ValidationException"
    assert msg == ("1 validation error detected: Value '0.065' at 'reward' failed to satisfy constraint: "
                   "Member must satisfy regular expression pattern: ^[0-9]+(\\.)?[0-9]{0,2}$")
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_enum_and_max_length_and_range(api):
    with pytest.raises(ClientError) as ei:
        api.call("list_reviewable_hits", Status="Done")
    assert "enum value set: [Reviewable, Reviewing]" in _err(ei.value)[2]
    with pytest.raises(ClientError) as ei:
        api.call("list_hits", MaxResults=101)
    assert "less than or equal to 100" in _err(ei.value)[2]
    with pytest.raises(ClientError) as ei:
        api.call("create_hit_type", Title="x" * 129, Description="d", Reward="0.10", AssignmentDurationInSeconds=60)
    assert _err(ei.value)[0] == "ValidationException"
    with pytest.raises(ClientError) as ei:
        api.call("create_hit_type", Title="t", Description="d", Reward="0.10", AssignmentDurationInSeconds=5)
    assert "greater than or equal to 30" in _err(ei.value)[2]


def test_unknown_hit_is_request_error_with_turk_code(api):
    with pytest.raises(ClientError) as ei:
        api.call("get_hit", HITId="3PR3LXCWSFNV4OJWZBHIMQOIJVSX9G")
    code, turk, msg = _err(ei.value)
    assert (code, turk) == ("RequestError", "AWS.MechanicalTurk.HITDoesNotExist")
    assert msg.rstrip().endswith(")") and msg.rsplit("(", 1)[1].rstrip(")").isdigit()


def test_bad_xml_question(market):
    t = market.client.call("create_hit_type", Title="t", Description="d", Reward="0.10", AssignmentDurationInSeconds=60)
    with pytest.raises(ClientError) as ei:
        market.client.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], LifetimeInSeconds=60, Question="<oops")
    assert _err(ei.value)[1] == "AWS.MechanicalTurk.XMLParseError"


def test_malformed_body_unknown_operation_and_types_keep_server_up(market):
    status, body, headers = _raw(market, b"{not json")
    assert status == 400 and "SerializationException" in body["__type"]
    assert "x-amzn-RequestId" in headers or "X-Amzn-Requestid" in headers or any(k.lower() == "x-amzn-requestid" for k in headers)
    status, body, _ = _raw(market, b"{}", target="MTurkRequesterServiceV20170117.FlyToTheMoon")
    assert status == 400 and "UnknownOperationException" in body["__type"]
    status, body, _ = _raw(market, b"{}", target=None)
    assert status == 400 and "UnknownOperationException" in body["__type"]
    status, body, _ = _raw(market, json.dumps({"HITId": 5}).encode(), target="MTurkRequesterServiceV20170117.GetHIT")
    assert status == 400 and "SerializationException" in body["__type"]
    status, body, _ = _raw(market, json.dumps({"Bogus": 1}).encode())
    assert status == 400 and "Unknown member" in body["Message"]
    status, body, _ = _raw(market, json.dumps({"HITId": "x", "ExpireAt": "soon"}).encode(), target="MTurkRequesterServiceV20170117.UpdateExpirationForHIT")
    assert status == 400
    # still serving, and nothing was created by the bad requests
    status, body, _ = _raw(market, b"{}")
    assert status == 200 and body["AvailableBalance"] == "10000.00"
    assert market.client.call("list_hits")["NumResults"] == 0


def test_missing_required_member_reaches_server_as_null_error(market):
    status, body, _ = _raw(market, json.dumps({"Title": "t"}).encode(),
                           target="MTurkRequesterServiceV20170117.CreateHITType")
    assert status == 400 and body["__type"] == "ValidationException"
    assert "3 validation errors detected" in body["message"] and "Value null at 'reward'" in body["message"]


def test_botocore_still_checks_its_own_side(api):
    with pytest.raises(ParamValidationError):
        api.call("get_hit")


def test_access_key_selects_account(market):
    from campaign.marketplaces.mturk_client import make_client

    market.hit()
    other = make_client("local", market.server.endpoint_url, credentials=market.server.add_account("other"), max_rps=0)
    assert other.call("list_hits")["NumResults"] == 0
    assert market.client.call("list_hits")["NumResults"] == 1


def test_failed_create_leaves_state_unchanged(market):
    t = market.client.call("create_hit_type", Title="t", Description="d", Reward="0.10", AssignmentDurationInSeconds=60)
    with pytest.raises(ClientError):
        market.client.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], LifetimeInSeconds=10, Question=QUESTION,
                           UniqueRequestToken="tok-a")
    # the token was not consumed: the same token now works
    h = market.client.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], LifetimeInSeconds=60, Question=QUESTION,
                           UniqueRequestToken="tok-a")["HIT"]
    assert market.client.call("list_hits")["HITs"][0]["HITId"] == h["HITId"]


def test_client_guards_production_and_hides_secrets(market):
    from campaign.marketplaces.mturk_client import ProductionNotAllowed, make_client

    with pytest.raises(ProductionNotAllowed):
        make_client("mturk")
    with pytest.raises(ValueError):
        make_client("local")
    secret = market.server.credentials.secret_access_key
    assert secret not in repr(market.client) and secret not in repr(market.server.credentials)
    assert market.client.raw.meta.config.retries == {"mode": "standard", "total_max_attempts": 3}  # botocore adds the first try
