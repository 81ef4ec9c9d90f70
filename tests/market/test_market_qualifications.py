"""Qualification operations through boto3 with MTurk's semantics: scores, updates, deletion, workers' requests,
IsRequestable / MustBeRequestable, and the HITs that use a type."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import boto3
import pytest
from botocore.exceptions import ClientError

from campaign.market import quals as Q
from campaign.market.engine import WorkerError


def _code(ei: pytest.ExceptionInfo[ClientError]) -> str:
    return str(ei.value.response.get("TurkErrorCode") or ei.value.response["Error"]["Code"])


def _type(c, name: str, **extra) -> str:
    return c.call("create_qualification_type", Name=name, Description="d", QualificationTypeStatus="Active",
                  **extra)["QualificationType"]["QualificationTypeId"]


def _other_requester(market):
    other = market.server.accounts.credentials_of("other") or market.server.add_account("other")
    return boto3.client("mturk", region_name="us-east-1", endpoint_url=market.server.endpoint_url,
                        aws_access_key_id=other.access_key_id, aws_secret_access_key=other.secret_access_key)


def test_is_requestable_and_must_be_requestable(market):
    c = market.client
    qid = _type(c, "Skilled")
    got = c.call("get_qualification_type", QualificationTypeId=qid)["QualificationType"]
    assert got["IsRequestable"] is True and got["AutoGranted"] is False
    system = c.call("get_qualification_type", QualificationTypeId=Q.PERCENT_APPROVED)["QualificationType"]
    assert system["IsRequestable"] is False and system["Name"] == "Worker_PercentAssignmentsApproved"
    # A client looking its own types up with MustBeRequestable=True finds them.
    mine = c.call("list_qualification_types", MustBeRequestable=True, MustBeOwnedByCaller=True, MaxResults=100)
    assert [t["QualificationTypeId"] for t in mine["QualificationTypes"]] == [qid]
    # Requestable only: never a system type.
    req_only = c.call("list_qualification_types", MustBeRequestable=True, MaxResults=100)["QualificationTypes"]
    assert all(t["IsRequestable"] for t in req_only) and qid in [t["QualificationTypeId"] for t in req_only]
    # Not only requestable: the system's types as well ("including those managed by the system").
    everything = c.call("list_qualification_types", MustBeRequestable=False, MaxResults=100)["QualificationTypes"]
    ids = [t["QualificationTypeId"] for t in everything]
    assert set(Q.SYSTEM_IDS) <= set(ids) and qid in ids
    assert not any(t["IsRequestable"] for t in everything if t["QualificationTypeId"] in Q.SYSTEM_IDS)
    found = c.call("list_qualification_types", MustBeRequestable=False, Query="Locale", MaxResults=100)["QualificationTypes"]
    assert [t["QualificationTypeId"] for t in found] == [Q.LOCALE]


def test_get_qualification_score_and_update(market):
    c = market.client
    qid = _type(c, "Score")
    market.workers.register("ASCORED")
    with pytest.raises(ClientError) as ei:
        c.call("get_qualification_score", QualificationTypeId=qid, WorkerId="ASCORED")
    assert _code(ei) == "AWS.MechanicalTurk.QualificationDoesNotExist"
    c.call("associate_qualification_with_worker", QualificationTypeId=qid, WorkerId="ASCORED", IntegerValue=73)
    q = c.call("get_qualification_score", QualificationTypeId=qid, WorkerId="ASCORED")["Qualification"]
    assert (q["QualificationTypeId"], q["WorkerId"], q["IntegerValue"], q["Status"]) == (qid, "ASCORED", 73, "Granted")
    assert q["GrantTime"].timestamp() == pytest.approx(market.clock.now())
    # Only the owner reads scores.
    with pytest.raises(ClientError) as ei:
        _other_requester(market).get_qualification_score(QualificationTypeId=qid, WorkerId="ASCORED")
    assert ei.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.PermissionDenied"

    up = c.call("update_qualification_type", QualificationTypeId=qid, Description="new words", RetryDelayInSeconds=60,
                AutoGranted=True, AutoGrantedValue=5, QualificationTypeStatus="Inactive")["QualificationType"]
    assert (up["Description"], up["RetryDelayInSeconds"], up["AutoGranted"], up["AutoGrantedValue"],
            up["QualificationTypeStatus"], up["Name"]) == ("new words", 60, True, 5, "Inactive", "Score")
    assert c.call("get_qualification_type", QualificationTypeId=qid)["QualificationType"]["Description"] == "new words"
    with pytest.raises(ClientError) as ei:
        c.call("update_qualification_type", QualificationTypeId=qid, Test="<QuestionForm/>", TestDurationInSeconds=60)
    assert _code(ei) == "AWS.MechanicalTurk.InvalidParameterValue"
    with pytest.raises(ClientError) as ei:
        _other_requester(market).update_qualification_type(QualificationTypeId=qid, Description="mine now")
    assert ei.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.PermissionDenied"


def test_associate_with_unknown_worker_is_refused(market):
    c = market.client
    qid = _type(c, "Known only")
    with pytest.raises(ClientError) as ei:
        c.call("associate_qualification_with_worker", QualificationTypeId=qid, WorkerId="ANOBODYATALL", IntegerValue=1)
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert ei.value.response["Error"]["Code"] == "ParameterValidationError"
    assert 'The value "ANOBODYATALL" is not valid for the parameter WorkerId.' in ei.value.response["Error"]["Message"]
    assert c.call("list_workers_with_qualification_type", QualificationTypeId=qid)["NumResults"] == 0


def test_list_hits_for_qualification_type(market):
    c = market.client
    qid, other = _type(c, "Needed"), _type(c, "Other")
    with_q = [market.hit(quals=[{"QualificationTypeId": qid, "Comparator": "Exists"}])["HITId"] for _ in range(2)]
    market.hit(quals=[{"QualificationTypeId": other, "Comparator": "Exists"}])
    market.hit()
    masters = market.hit(quals=[{"QualificationTypeId": "2ARFPLSP75KLA8M8DH1HTEQVJT3SY6", "Comparator": "Exists"}])["HITId"]
    got = c.call("list_hits_for_qualification_type", QualificationTypeId=qid, MaxResults=100)
    assert [h["HITId"] for h in got["HITs"]] == with_q and got["HITs"][0]["QualificationRequirements"][0]["QualificationTypeId"] == qid
    sys_hits = c.call("list_hits_for_qualification_type", QualificationTypeId="2ARFPLSP75KLA8M8DH1HTEQVJT3SY6", MaxResults=100)
    assert [h["HITId"] for h in sys_hits["HITs"]] == [masters]
    # Another requester asking about the same type sees none of these HITs.
    assert _other_requester(market).list_hits_for_qualification_type(QualificationTypeId=qid, MaxResults=100)["NumResults"] == 0
    # A deleted (disposed) HIT is no longer listed.
    c.call("update_expiration_for_hit", HITId=with_q[0], ExpireAt=0)
    c.call("delete_hit", HITId=with_q[0])
    got = c.call("list_hits_for_qualification_type", QualificationTypeId=qid, MaxResults=100)
    assert [h["HITId"] for h in got["HITs"]] == with_q[1:]


def _post(market, path: str, payload: dict) -> tuple[int, dict]:
    """As the signed-in worker's browser does: the session of `payload["WorkerId"]` (registered through the
    operator), its CSRF token; an unregistered worker has no session and is refused before the engine."""
    wid = payload["WorkerId"]
    headers = {"Content-Type": "application/json"}
    if wid in market.workers._sessions:
        cookie, csrf = market.workers._sessions[wid]
        headers.update({"Cookie": f"mkt_session={cookie}", "X-CSRF-Token": csrf})
    req = urllib.request.Request(market.server.endpoint_url + path, data=json.dumps(payload).encode(),
                                 headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_worker_requests_accepted_and_rejected(market):
    c, e = market.client, market.server.engine
    qid = _type(c, "Ask me", RetryDelayInSeconds=3600)
    once = _type(c, "Ask once")
    for w in ("AASKER1", "AASKER2", "AASKER3"):
        market.workers.register(w)
    # Through the worker site's JSON endpoint, as a worker's browser does.
    status, body = _post(market, "/worker/api/request-qualification", {"WorkerId": "AASKER1", "QualificationTypeId": qid})
    assert status == 200 and body["Status"] == "Pending"
    r2 = e.worker("request_qualification", "AASKER2", qid)
    e.worker("request_qualification", "AASKER3", once)
    status, body = _post(market, "/worker/api/request-qualification", {"WorkerId": "AASKER1", "QualificationTypeId": qid})
    assert status == 409 and body["error"] == "RequestPending"

    pending = c.call("list_qualification_requests", QualificationTypeId=qid, MaxResults=100)["QualificationRequests"]
    assert [(r["WorkerId"], r["QualificationTypeId"]) for r in pending] == [("AASKER1", qid), ("AASKER2", qid)]
    assert c.call("list_qualification_requests", MaxResults=100)["NumResults"] == 3  # all of the caller's types
    assert _other_requester(market).list_qualification_requests(MaxResults=100)["NumResults"] == 0

    c.call("accept_qualification_request", QualificationRequestId=pending[0]["QualificationRequestId"], IntegerValue=90)
    assert c.call("get_qualification_score", QualificationTypeId=qid, WorkerId="AASKER1")["Qualification"]["IntegerValue"] == 90
    c.call("reject_qualification_request", QualificationRequestId=r2["QualificationRequestId"], Reason="too few answers")
    with pytest.raises(ClientError) as ei:
        c.call("get_qualification_score", QualificationTypeId=qid, WorkerId="AASKER2")
    assert _code(ei) == "AWS.MechanicalTurk.QualificationDoesNotExist"
    assert e.worker("qualification_requests", "AASKER2")[0]["Reason"] == "too few answers"
    assert [r["WorkerId"] for r in c.call("list_qualification_requests", QualificationTypeId=qid)["QualificationRequests"]] == []
    with pytest.raises(ClientError) as ei:  # answered once, not again
        c.call("accept_qualification_request", QualificationRequestId=r2["QualificationRequestId"])
    assert _code(ei) == "AWS.MechanicalTurk.InvalidParameterValue"
    with pytest.raises(ClientError) as ei:  # only the owner answers
        _other_requester(market).reject_qualification_request(QualificationRequestId=pending[1]["QualificationRequestId"], Reason="x")
    assert ei.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.InvalidParameterValue"

    # Retry rules: after RetryDelayInSeconds again; without one, never.
    status, body = _post(market, "/worker/api/request-qualification", {"WorkerId": "AASKER2", "QualificationTypeId": qid})
    assert status == 409 and body["error"] == "RetryTooSoon"
    market.clock.advance(3601)
    assert e.worker("request_qualification", "AASKER2", qid)["Status"] == "Pending"
    c.call("reject_qualification_request", QualificationRequestId=c.call("list_qualification_requests", QualificationTypeId=once)
           ["QualificationRequests"][0]["QualificationRequestId"], Reason="no")
    status, body = _post(market, "/worker/api/request-qualification", {"WorkerId": "AASKER3", "QualificationTypeId": once})
    assert status == 409 and body["error"] == "RetryNotAllowed"
    # System types and unknown types cannot be requested; unknown workers cannot request.
    for wid, q, code in (("AASKER3", Q.ADULT, "QualificationTypeNotFound"), ("AASKER3", "3PR3LXCWSFNV4OJWZBHIMQOIJVSX9G", "QualificationTypeNotFound")):
        status, body = _post(market, "/worker/api/request-qualification", {"WorkerId": wid, "QualificationTypeId": q})
        assert status == 404 and body["error"] == code
    status, body = _post(market, "/worker/api/request-qualification", {"WorkerId": "ANOTREGISTERED", "QualificationTypeId": qid})
    assert status == 401 and body["error"] == "NotSignedIn"  # no session: refused before the engine
    with pytest.raises(WorkerError) as wi:
        e.worker("request_qualification", "ANOTREGISTERED", qid)
    assert wi.value.code == "UnknownWorker"


def test_auto_granted_request_and_inactive_type(market):
    c, e = market.client, market.server.engine
    auto = _type(c, "Auto", AutoGranted=True, AutoGrantedValue=7)
    market.workers.register("AAUTO")
    assert e.worker("request_qualification", "AAUTO", auto)["Status"] == "Granted"
    assert c.call("get_qualification_score", QualificationTypeId=auto, WorkerId="AAUTO")["Qualification"]["IntegerValue"] == 7
    assert c.call("list_qualification_requests", QualificationTypeId=auto)["NumResults"] == 0  # never pending
    c.call("update_qualification_type", QualificationTypeId=auto, QualificationTypeStatus="Inactive")
    market.workers.register("ALATE")
    status, body = _post(market, "/worker/api/request-qualification", {"WorkerId": "ALATE", "QualificationTypeId": auto})
    assert status == 409 and body["error"] == "QualificationTypeInactive"


def test_delete_qualification_type_disposes_it(market):
    c, e = market.client, market.server.engine
    qid = _type(c, "Temporary")
    market.workers.register("AHAS")
    market.workers.register("AWAITS")
    c.call("associate_qualification_with_worker", QualificationTypeId=qid, WorkerId="AHAS", IntegerValue=1)
    req = [{"QualificationTypeId": qid, "Comparator": "Exists"}]
    hit_type = c.call("create_hit_type", Title="t", Description="d", Reward="0.10", AssignmentDurationInSeconds=600,
                      QualificationRequirements=req)["HITTypeId"]
    live = market.hit(quals=req)
    pending = e.worker("request_qualification", "AWAITS", qid)
    with pytest.raises(ClientError) as ei:
        _other_requester(market).delete_qualification_type(QualificationTypeId=qid)
    assert ei.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.PermissionDenied"

    c.call("delete_qualification_type", QualificationTypeId=qid)
    for call, kw in (("get_qualification_type", {}), ("get_qualification_score", {"WorkerId": "AHAS"}),
                     ("list_workers_with_qualification_type", {}), ("delete_qualification_type", {}),
                     ("associate_qualification_with_worker", {"WorkerId": "AWAITS"})):
        with pytest.raises(ClientError) as ei:
            c.call(call, QualificationTypeId=qid, **kw)
        assert _code(ei) == "AWS.MechanicalTurk.QualificationTypeDoesNotExist", call
    assert qid not in [t["QualificationTypeId"] for t in
                       c.call("list_qualification_types", MustBeRequestable=True, MustBeOwnedByCaller=True)["QualificationTypes"]]
    # Its HIT types go with it, and no new HIT may require it.
    with pytest.raises(ClientError) as ei:
        c.call("create_hit_with_hit_type", HITTypeId=hit_type, LifetimeInSeconds=600, Question=live["Question"])
    assert _code(ei) == "AWS.MechanicalTurk.InvalidParameterValue"
    with pytest.raises(ClientError) as ei:
        market.hit(quals=req)
    assert _code(ei) == "AWS.MechanicalTurk.QualificationTypeDoesNotExist"
    # Pending requests are rejected; the worker sees why.
    assert e.worker("qualification_requests", "AWAITS") == [
        {"QualificationRequestId": pending["QualificationRequestId"], "QualificationTypeId": qid, "Status": "Rejected",
         "SubmitTime": market.clock.now(), "Reason": "The Qualification type was deleted by its owner."}]
    # HITs already posted keep working for the workers granted before (MTurk keeps grants for active HITs).
    assert market.workers.accept("AHAS", live["HITId"])["HITId"] == live["HITId"]
    # The name is free again.
    again = _type(c, "Temporary")
    assert again != qid


def test_listing_with_system_types_pages_across_both(fresh_market):
    c = fresh_market.client  # it lists every type on the marketplace
    mine = [_type(c, f"Mine {i}") for i in range(4)]
    seen: list[str] = []
    resp = c.call("list_qualification_types", MustBeRequestable=False, MaxResults=3)
    while resp["QualificationTypes"]:
        seen += [t["QualificationTypeId"] for t in resp["QualificationTypes"]]
        resp = c.call("list_qualification_types", MustBeRequestable=False, MaxResults=3, NextToken=resp["NextToken"])
    assert seen == list(Q.SYSTEM_NAMES) + mine
