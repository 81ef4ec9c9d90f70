"""Issue 25, bounds: every time, count and amount the requester API takes, and every fault setting, has
a range; a value outside it is a 4xx that changes nothing (never a 500, never a value that breaks later
answers)."""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request

import pytest

from campaign.market import auth
from campaign.market import protocol as P
from campaign.market.faults import FaultConfig
from campaign.market.server import admin_token
from tests.market.test_security import TARGET, _api, _post


def _expire(market, hit_id: str, raw_at: str) -> tuple[int, dict]:
    """UpdateExpirationForHIT with ExpireAt written into the JSON as given (JSON has no NaN; Python's reader takes it)."""
    url = market.server.endpoint_url + "/"
    body = ('{"HITId": ' + json.dumps(hit_id) + ', "ExpireAt": ' + raw_at + "}").encode()
    headers = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": TARGET + "UpdateExpirationForHIT"}
    creds = market.server.credentials
    headers = auth.sign_headers(url, body, headers, creds.access_key_id, creds.secret_access_key)
    status, payload, _ = _post(url, body, headers)
    return status, payload


@pytest.mark.parametrize("raw", ["1e300", "NaN", "Infinity", "-Infinity", "-1", "253402300800", '"99999-01-01T00:00:00"'])
def test_expire_at_outside_what_a_client_can_read_is_refused(market, raw):
    h = market.hit()
    before = market.client.call("get_hit", HITId=h["HITId"])["HIT"]["Expiration"]
    status, out = _expire(market, h["HITId"], raw)
    assert status == 400 and out["__type"].endswith(("ValidationException", "SerializationException")), out
    # and every later read still works in boto3, with the HIT unchanged
    assert market.client.call("get_hit", HITId=h["HITId"])["HIT"]["Expiration"] == before
    assert market.client.call("list_hits")["NumResults"] == 1


def test_expire_at_more_than_a_year_ahead_is_refused(market):
    h = market.hit()
    status, out = _expire(market, h["HITId"], str(int(market.clock.now()) + 31_536_000 + 10))
    assert (status, out["__type"]) == (400, "ValidationException") and "expireAt" in out["message"]
    status, _ = _expire(market, h["HITId"], str(int(market.clock.now()) + 86_400))
    assert status == 200


@pytest.mark.parametrize(("op", "params", "member"), [
    ("CreateHITType", {"Title": "t", "Description": "d", "Reward": "0.10", "AssignmentDurationInSeconds": 10**12}, "assignmentDurationInSeconds"),
    ("CreateHITType", {"Title": "t", "Description": "d", "Reward": "0.10", "AssignmentDurationInSeconds": 60,
                       "AutoApprovalDelayInSeconds": -5}, "autoApprovalDelayInSeconds"),
    ("CreateHITType", {"Title": "t", "Description": "d", "Reward": "0.10", "AssignmentDurationInSeconds": 60,
                       "QualificationRequirements": [{"QualificationTypeId": "000000000000000000L0", "Comparator": "In",
                                                      "IntegerValues": [1, 2**40]}]}, "integerValues"),
    ("CreateQualificationType", {"Name": "q", "Description": "d", "QualificationTypeStatus": "Active",
                                 "RetryDelayInSeconds": 10**15}, "retryDelayInSeconds"),
    ("CreateQualificationType", {"Name": "q", "Description": "d", "QualificationTypeStatus": "Active",
                                 "AutoGranted": True, "AutoGrantedValue": 2**31}, "autoGrantedValue"),
    ("AssociateQualificationWithWorker", {"QualificationTypeId": "X" * 20, "WorkerId": "AWORKER1", "IntegerValue": -(2**31) - 1},
     "integerValue"),
    ("CreateAdditionalAssignmentsForHIT", {"HITId": "X" * 30, "NumberOfAdditionalAssignments": 0}, "numberOfAdditionalAssignments"),
    ("SendBonus", {"WorkerId": "AWORKER1", "BonusAmount": "123456789.00", "AssignmentId": "X" * 30, "Reason": "r"}, "bonusAmount"),
    ("ListHITs", {"MaxResults": 1000}, "maxResults"),
])
def test_counts_times_and_amounts_out_of_range_are_validation_errors(market, op, params, member):
    status, out = _api(market, op, params)
    assert (status, out["__type"]) == (400, "ValidationException"), out
    assert member in out["message"]
    assert market.client.call("list_hits")["NumResults"] == 0
    assert market.client.call("list_qualification_types", MustBeRequestable=False, MustBeOwnedByCaller=True)["NumResults"] == 0


def test_bound_problems_reaches_nested_members():
    params = {"QualificationRequirements": [{"QualificationTypeId": "x", "IntegerValues": [5, -(2**31) - 1]}],
              "LifetimeInSeconds": 29, "MaxAssignments": 1}
    problems = P.bound_problems(params)
    assert len(problems) == 2
    assert any("qualificationRequirements.1.member.integerValues.2.member" in p for p in problems)
    assert any("lifetimeInSeconds" in p and "greater than or equal to 30" in p for p in problems)


# -- fault settings -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("settings", [{"fault_rate": math.nan}, {"fault_rate": -1}, {"fault_rate": 1.5},
                                      {"latency_ms": 1e12}, {"throttle_rate": math.inf}, {"visibility_lag": -3},
                                      {"seed": 1.5}, {"seed": True}, {"fault_rate": "nan"}, {"latency_ms": [1]},
                                      {"lost_rate": math.nan}, {"lost_rate": -0.1}, {"lost_rate": 1.01}, {"lost_rate": None}])
def test_fault_settings_out_of_range_are_refused(settings):
    with pytest.raises(ValueError):
        FaultConfig.from_dict(settings)


def test_admin_faults_refuses_nan_negative_and_huge_values(market):
    url = market.server.endpoint_url + "/admin/faults"
    token = admin_token(market.server.db.path.parent)
    before = market.server.core.faults.config.to_dict()
    for raw in (b'{"fault_rate": NaN}', b'{"fault_rate": -1}', b'{"latency_ms": 1e12}', b'{"throttle_burst": Infinity}'):
        req = urllib.request.Request(url, data=raw, method="POST", headers={"Authorization": f"Bearer {token}"})
        with pytest.raises(urllib.error.HTTPError) as ei:
            urllib.request.urlopen(req, timeout=10)
        assert ei.value.code == 400 and json.loads(ei.value.read())["error"] == "BadFaults"
    assert market.server.core.faults.config.to_dict() == before
    req = urllib.request.Request(url, data=b'{"fault_rate": 0.5, "latency_ms": 5}', method="POST",
                                 headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert json.loads(r.read())["fault_rate"] == 0.5
