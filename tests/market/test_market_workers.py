"""Worker side: listing, accepting, qualifications, blocks, HTML frames and submissions."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request

import pytest
from botocore.exceptions import ClientError

from campaign.answer_xml import build_answer_xml, parse_answer_xml
from campaign.market.worker_client import WorkerAPIError

LOCALE_US = {"QualificationTypeId": "00000000000000000071", "Comparator": "EqualTo", "LocaleValues": [{"Country": "US"}]}


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_answer_xml_round_trip_and_format():
    xml = build_answer_xml([("assignmentId", "X"), ("a", "ü & <b>"), ("a", "2"), ("workerId", "W")])
    assert xml.startswith('<?xml version="1.0" encoding="ASCII"?><QuestionFormAnswers xmlns="http://mechanicalturk.amazonaws.com/'
                          'AWSMechanicalTurkDataSchemas/2005-10-01/QuestionFormAnswers.xsd">')
    assert "&#252;" in xml and xml.isascii()
    assert parse_answer_xml(xml) == [("a", "ü & <b>"), ("a", "2")]


def test_preview_task_and_submit_rules(market):
    h = market.hit()
    q = urllib.parse.urlencode({"hitId": h["HITId"], "assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"})
    status, page = _get(f"{market.server.endpoint_url}/worker/frame?{q}")
    assert status == 200 and 'action="/mturk/externalSubmit"' in page and "/shims/externalHIT_v1.js" in page
    assert "mturk.com" not in page and "s3.amazonaws.com" not in page
    assert _get(f"{market.server.content_url}/shims/externalHIT_v1.js")[0] == 200
    market.workers.register("AWORKERONE")
    with pytest.raises(WorkerAPIError) as ei:
        market.workers.submit("ASSIGNMENT_ID_NOT_AVAILABLE", [("score", "1")])
    assert ei.value.status == 400
    acc = market.workers.accept("AWORKERONE", h["HITId"])
    assert market.workers.task_html(acc["AssignmentId"]) == page
    market.workers.submit(acc["AssignmentId"], [("score", "4"), ("hitId", "ignored")])
    with pytest.raises(WorkerAPIError) as ei:
        market.workers.submit(acc["AssignmentId"], [("score", "5")])
    assert ei.value.code == "AssignmentNotActive"
    with pytest.raises(WorkerAPIError):
        market.workers.submit("NOSUCHASSIGNMENT", [("score", "5")])
    (a,) = market.client.call("list_assignments_for_hit", HITId=h["HITId"])["Assignments"]
    assert parse_answer_xml(a["Answer"]) == [("score", "4")]
    with pytest.raises(WorkerAPIError) as ei:
        market.workers.accept("AWORKERONE", h["HITId"])
    assert ei.value.code == "AlreadyWorked"
    with pytest.raises(WorkerAPIError) as ei:
        market.workers.accept("AWORKERONE", "NOSUCHHIT")
    assert ei.value.code == "HITNotFound"


def test_no_slot_and_listing_order(market):
    h1 = market.hit(max_assignments=1)
    market.clock.advance(1)
    h2 = market.hit(max_assignments=1)
    for w in ("AONE", "ATWO"):
        market.workers.register(w)
    assert [x["HITId"] for x in market.workers.available("ATWO")] == [h1["HITId"], h2["HITId"]]
    market.workers.accept("AONE", h1["HITId"])
    with pytest.raises(WorkerAPIError) as ei:
        market.workers.accept("ATWO", h1["HITId"])
    assert ei.value.code == "NoAvailableSlot"
    assert [x["HITId"] for x in market.workers.available("ATWO", max=1)] == [h2["HITId"]]


def test_qualification_requirements_and_guards(market):
    pct = {"QualificationTypeId": "000000000000000000L0", "Comparator": "GreaterThanOrEqualTo", "IntegerValues": [95]}
    h = market.hit(quals=[LOCALE_US, pct])
    market.workers.register("AUSGOOD", country="US", approval=99)
    market.workers.register("ADELOW", country="DE", approval=99)
    market.workers.register("AUSLOW", country="US", approval=80)
    assert market.workers.accept("AUSGOOD", h["HITId"])["HITId"] == h["HITId"]
    for w in ("ADELOW", "AUSLOW"):
        assert [x["HITId"] for x in market.workers.available(w)] == [h["HITId"]]  # Accept guard: still discoverable
        with pytest.raises(WorkerAPIError) as ei:
            market.workers.accept(w, h["HITId"])
        assert ei.value.code == "DoesNotMeetRequirements"
    hidden = market.hit(quals=[{**LOCALE_US, "ActionsGuarded": "DiscoverPreviewAndAccept"}])
    assert hidden["HITId"] not in [x["HITId"] for x in market.workers.available("ADELOW")]
    masters = market.hit(quals=[{"QualificationTypeId": "2ARFPLSP75KLA8M8DH1HTEQVJT3SY6", "Comparator": "Exists"}])
    with pytest.raises(WorkerAPIError):
        market.workers.accept("AUSLOW", masters["HITId"])
    market.workers.register("AMASTER", masters=True)
    market.workers.accept("AMASTER", masters["HITId"])


def test_custom_qualification_types(market):
    c = market.client
    qt = c.call("create_qualification_type", Name="good annotator", Description="passed", QualificationTypeStatus="Active")["QualificationType"]
    with pytest.raises(ClientError) as ei:
        c.call("create_qualification_type", Name="good annotator", Description="again", QualificationTypeStatus="Active")
    assert ei.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.QualificationTypeAlreadyExists"
    assert c.call("get_qualification_type", QualificationTypeId=qt["QualificationTypeId"])["QualificationType"]["Name"] == "good annotator"
    assert c.call("list_qualification_types", MustBeRequestable=False, MustBeOwnedByCaller=True)["NumResults"] == 1
    req = {"QualificationTypeId": qt["QualificationTypeId"], "Comparator": "GreaterThan", "IntegerValues": [50]}
    h = market.hit(quals=[req])
    market.workers.register("AHIGH")
    market.workers.register("ANONE")
    c.call("associate_qualification_with_worker", QualificationTypeId=qt["QualificationTypeId"], WorkerId="AHIGH", IntegerValue=80)
    market.workers.accept("AHIGH", h["HITId"])
    with pytest.raises(WorkerAPIError) as ei:
        market.workers.accept("ANONE", h["HITId"])
    assert ei.value.code == "DoesNotMeetRequirements"
    workers = c.call("list_workers_with_qualification_type", QualificationTypeId=qt["QualificationTypeId"])["Qualifications"]
    assert [(w["WorkerId"], w["IntegerValue"]) for w in workers] == [("AHIGH", 80)]
    c.call("disassociate_qualification_from_worker", QualificationTypeId=qt["QualificationTypeId"], WorkerId="AHIGH")
    assert c.call("list_workers_with_qualification_type", QualificationTypeId=qt["QualificationTypeId"])["NumResults"] == 0
    with pytest.raises(ClientError) as ei:
        c.call("associate_qualification_with_worker", QualificationTypeId="3PR3LXCWSFNV4OJWZBHIMQOIJVSX9G", WorkerId="AHIGH")
    assert ei.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.QualificationTypeDoesNotExist"
    with pytest.raises(ClientError) as ei:
        market.hit(quals=[{"QualificationTypeId": "3PR3LXCWSFNV4OJWZBHIMQOIJVSX9G", "Comparator": "Exists"}])
    assert ei.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.QualificationTypeDoesNotExist"
    with pytest.raises(ClientError) as ei:
        market.hit(quals=[{**req, "IntegerValues": [1, 2]}])
    assert ei.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.InvalidParameterValue"


def test_blocks_hide_and_refuse(market):
    h = market.hit()
    market.workers.register("ABAD")
    market.client.call("create_worker_block", WorkerId="ABAD", Reason="spam")
    assert market.workers.available("ABAD") == []
    with pytest.raises(WorkerAPIError) as ei:
        market.workers.accept("ABAD", h["HITId"])
    assert ei.value.code == "Blocked"
    market.client.call("delete_worker_block", WorkerId="ABAD", Reason="sorry")
    market.client.call("delete_worker_block", WorkerId="ABAD")  # not blocked: still fine
    assert market.client.call("list_worker_blocks")["NumResults"] == 0
    market.workers.accept("ABAD", h["HITId"])


def test_notify_workers_only_known_workers(market):
    h = market.hit()
    aid = market.work(h["HITId"], "AKNOWN")
    market.client.call("approve_assignment", AssignmentId=aid)
    r = market.client.call("notify_workers", Subject="hi", MessageText="new HITs", WorkerIds=["AKNOWN", "ASTRANGER"])
    fails = r["NotifyWorkersFailureStatuses"]
    assert [f["WorkerId"] for f in fails] == ["ASTRANGER"] and fails[0]["NotifyWorkersFailureCode"] == "HardFailure"


def test_html_pages_escape_untrusted_text(market):
    t = market.client.call("create_hit_type", Title="<script>alert(1)</script>", Description="a & b",
                           Reward="0.10", AssignmentDurationInSeconds=60)
    from tests.market.conftest import QUESTION

    market.client.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], LifetimeInSeconds=600, Question=QUESTION)
    market.workers.register("AHUMAN")
    cookie = market.workers._sessions["AHUMAN"][0]  # the page as the signed-in worker sees it
    req = urllib.request.Request(f"{market.server.endpoint_url}/worker", headers={"Cookie": f"mkt_session={cookie}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        status, page = r.status, r.read().decode()
    assert status == 200 and "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page


def test_faults_throttle_and_service_fault(market):
    from campaign.marketplaces.mturk_client import make_client

    raw = make_client("local", market.server.endpoint_url, credentials=market.server.credentials, max_rps=0, max_attempts=1)
    market.server.set_faults(throttle_rate=0.001, throttle_burst=2)
    raw.call("get_account_balance")
    raw.call("get_account_balance")
    with pytest.raises(ClientError) as ei:
        raw.call("get_account_balance")
    assert ei.value.response["Error"] == {"Code": "ThrottlingException", "Message": "Rate exceeded"}
    market.server.set_faults(fault_rate=1.0)
    with pytest.raises(ClientError) as ei:
        raw.call("get_account_balance")
    assert ei.value.response["Error"]["Code"] == "ServiceFault"
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    url = f"{market.server.endpoint_url}/admin/faults"
    # loopback alone is not enough (a reverse proxy forwards from loopback): the folder's token is needed
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}):
        with pytest.raises(urllib.error.HTTPError) as denied:
            urllib.request.urlopen(urllib.request.Request(url, data=b'{"fault_rate": 0}', method="POST", headers=headers), timeout=10)
        assert denied.value.code == 403
    assert market.server.core.faults.config.fault_rate == 1.0  # unchanged
    token_file = market.server.db.path.parent / "admin-token"
    token = token_file.read_text().strip()
    assert token_file.stat().st_mode & 0o077 == 0
    req = urllib.request.Request(url, data=b'{"fault_rate": 0}', method="POST", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200
    assert raw.call("get_account_balance")["AvailableBalance"] == "10000.00"


def test_a_lost_answer_is_a_service_fault_for_a_call_that_took_effect(market):
    """`lost_rate`: the call is carried out, then answered as if it failed (a client cannot tell the two
    apart): the qualification type exists although its creation was answered 500."""
    from campaign.marketplaces.signed_json import open_signed_json

    raw = open_signed_json(market.server.endpoint_url, credentials=market.server.credentials, max_attempts=1)  # no retry
    before = raw.call("get_account_balance")["AvailableBalance"]  # answered: no fault set yet
    market.server.set_faults(lost_rate=1.0)
    with pytest.raises(ClientError) as ei:
        raw.call("create_qualification_type", Name="lost answer", Description="d", QualificationTypeStatus="Active")
    assert ei.value.response["Error"]["Code"] == "ServiceFault"
    market.server.set_faults(lost_rate=0.0)
    listed = raw.call("list_qualification_types", MustBeRequestable=False, MustBeOwnedByCaller=True)["QualificationTypes"]
    assert [q["Name"] for q in listed] == ["lost answer"]
    assert raw.call("get_account_balance")["AvailableBalance"] == before  # and answered again once it is off


def test_retries_ride_out_throttling(market):
    from campaign.marketplaces.mturk_client import make_client

    patient = make_client("local", market.server.endpoint_url, credentials=market.server.credentials, max_rps=0, max_attempts=10)
    market.server.set_faults(throttle_rate=20, throttle_burst=1)
    for _ in range(5):  # standard retry mode with 10 attempts absorbs the throttles
        assert patient.call("get_account_balance")["AvailableBalance"] == "10000.00"
