"""HIT and assignment life cycle, idempotency tokens, pagination and persistence, driven through boto3."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from botocore.exceptions import ClientError

from campaign.answer_xml import parse_answer_xml
from tests.market.conftest import QUESTION, _market


def _turk(exc: ClientError) -> str:
    return exc.value.response.get("TurkErrorCode", "")


def test_create_get_list_and_timestamps_are_datetimes(market):
    h = market.hit(max_assignments=2, RequesterAnnotation="item-1")
    assert re.fullmatch(r"[A-Z0-9]{30}", h["HITId"])
    assert h["HITStatus"] == "Assignable" and h["NumberOfAssignmentsAvailable"] == 2
    assert isinstance(h["Expiration"], datetime) and isinstance(h["CreationTime"], datetime)
    assert h["Expiration"].timestamp() == pytest.approx(market.clock.now() + 3600)
    got = market.client.call("get_hit", HITId=h["HITId"])["HIT"]
    assert got["RequesterAnnotation"] == "item-1" and got["Reward"] == "0.50"


def test_hit_type_id_is_deterministic(api):
    kw = dict(Title="t", Description="d", Reward="0.10", AssignmentDurationInSeconds=60)
    a = api.call("create_hit_type", **kw)["HITTypeId"]
    assert api.call("create_hit_type", **kw)["HITTypeId"] == a
    assert api.call("create_hit_type", **{**kw, "Reward": "0.11"})["HITTypeId"] != a


def test_full_cycle_submit_approve_reject_reviewable_delete(market):
    h = market.hit(max_assignments=2)
    a1 = market.work(h["HITId"], "AWORKERONE")
    got = market.client.call("get_hit", HITId=h["HITId"])["HIT"]
    assert got["NumberOfAssignmentsAvailable"] == 1 and got["NumberOfAssignmentsPending"] == 0
    a2 = market.work(h["HITId"], "AWORKERTWO", answer="5")
    assert market.client.call("get_hit", HITId=h["HITId"])["HIT"]["HITStatus"] == "Reviewable"
    listed = list(market.client.paginate("list_assignments_for_hit", "Assignments", HITId=h["HITId"]))
    assert [a["AssignmentId"] for a in listed] == [a1, a2]
    assert parse_answer_xml(listed[1]["Answer"]) == [("score", "5")]
    assert isinstance(listed[0]["AutoApprovalTime"], datetime)
    # DeleteHIT refuses while submitted work is unreviewed (with MTurk's misleading message)
    with pytest.raises(ClientError) as ei:
        market.client.call("delete_hit", HITId=h["HITId"])
    assert _turk(ei) == "AWS.MechanicalTurk.InvalidHITState" and "'Reviewable'" in ei.value.response["Error"]["Message"]
    market.client.call("approve_assignment", AssignmentId=a1, RequesterFeedback="thanks")
    market.client.call("reject_assignment", AssignmentId=a2, RequesterFeedback="wrong")
    with pytest.raises(ClientError) as ei:
        market.client.call("approve_assignment", AssignmentId=a1)
    assert _turk(ei) == "AWS.MechanicalTurk.InvalidAssignmentState"
    with pytest.raises(ClientError) as ei:
        market.client.call("reject_assignment", AssignmentId=a1, RequesterFeedback="no")
    assert _turk(ei) == "AWS.MechanicalTurk.InvalidAssignmentState"
    a = market.client.call("get_assignment", AssignmentId=a2)["Assignment"]
    assert a["AssignmentStatus"] == "Rejected" and a["RequesterFeedback"] == "wrong"
    market.client.call("approve_assignment", AssignmentId=a2, OverrideRejection=True)
    assert market.client.call("get_assignment", AssignmentId=a2)["Assignment"]["AssignmentStatus"] == "Approved"
    statuses = market.client.call("list_assignments_for_hit", HITId=h["HITId"], AssignmentStatuses=["Rejected"])
    assert statuses["NumResults"] == 0
    assert market.client.call("get_hit", HITId=h["HITId"])["HIT"]["NumberOfAssignmentsCompleted"] == 2
    market.client.call("delete_hit", HITId=h["HITId"])
    assert market.client.call("list_hits")["NumResults"] == 0
    assert market.client.call("get_hit", HITId=h["HITId"])["HIT"]["HITStatus"] == "Disposed"


def test_delete_refused_for_assignable_hit(market):
    h = market.hit()
    with pytest.raises(ClientError) as ei:
        market.client.call("delete_hit", HITId=h["HITId"])
    assert "'Assignable'" in ei.value.response["Error"]["Message"]


def test_unknown_assignment(api):
    with pytest.raises(ClientError) as ei:
        api.call("get_assignment", AssignmentId="3PR3LXCWSFNV4OJWZBHIMQOIJVSX9G")
    assert _turk(ei) == "AWS.MechanicalTurk.AssignmentDoesNotExist"


def test_accepted_but_unsubmitted_is_invisible(market):
    h = market.hit()
    market.workers.register("AWORKERONE")
    aid = market.workers.accept("AWORKERONE", h["HITId"])["AssignmentId"]
    assert market.client.call("list_assignments_for_hit", HITId=h["HITId"])["NumResults"] == 0
    with pytest.raises(ClientError) as ei:
        market.client.call("get_assignment", AssignmentId=aid)
    assert _turk(ei) == "AWS.MechanicalTurk.AssignmentDoesNotExist"
    assert market.client.call("get_hit", HITId=h["HITId"])["HIT"]["NumberOfAssignmentsPending"] == 1


def test_auto_approval_abandon_and_expiry(market):
    h = market.hit(max_assignments=2, lifetime=7200, duration=600, auto=3600)
    a1 = market.work(h["HITId"], "AWORKERONE")
    market.workers.register("AWORKERTWO")
    market.workers.accept("AWORKERTWO", h["HITId"])
    assert market.client.call("get_hit", HITId=h["HITId"])["HIT"]["HITStatus"] == "Unassignable"
    market.clock.advance(601)  # the second worker's deadline passes: abandoned, slot back
    got = market.client.call("get_hit", HITId=h["HITId"])["HIT"]
    assert got["HITStatus"] == "Assignable" and got["NumberOfAssignmentsAvailable"] == 1
    market.clock.advance(3000)  # auto-approval of the first
    a = market.client.call("get_assignment", AssignmentId=a1)["Assignment"]
    assert a["AssignmentStatus"] == "Approved" and "ApprovalTime" in a
    market.clock.advance(7200)  # expired, nothing pending -> Reviewable
    got = market.client.call("get_hit", HITId=h["HITId"])["HIT"]
    assert got["HITStatus"] == "Reviewable" and got["NumberOfAssignmentsAvailable"] == 0
    assert [x["HITId"] for x in market.client.call("list_reviewable_hits")["HITs"]] == [h["HITId"]]
    assert market.workers.available("AWORKERTWO") == []


def test_return_puts_slot_back(market):
    h = market.hit(max_assignments=1)
    market.workers.register("AWORKERONE")
    aid = market.workers.accept("AWORKERONE", h["HITId"])["AssignmentId"]
    assert market.client.call("get_hit", HITId=h["HITId"])["HIT"]["HITStatus"] == "Unassignable"
    market.workers.return_assignment(aid)
    assert market.client.call("get_hit", HITId=h["HITId"])["HIT"]["HITStatus"] == "Assignable"


def test_update_expiration_expire_extend_and_implicit_token(market):
    h = market.hit(lifetime=3600)
    past = datetime.fromtimestamp(market.clock.now() - 60, UTC)
    market.client.call("update_expiration_for_hit", HITId=h["HITId"], ExpireAt=past)
    got = market.client.call("get_hit", HITId=h["HITId"])["HIT"]
    assert got["HITStatus"] == "Reviewable" and got["Expiration"].timestamp() == market.clock.now()
    with pytest.raises(ClientError) as ei:
        market.client.call("update_expiration_for_hit", HITId=h["HITId"], ExpireAt=past)
    assert "already been processed" in ei.value.response["Error"]["Message"]
    future = datetime.fromtimestamp(market.clock.now() + 86400, UTC)
    market.client.call("update_expiration_for_hit", HITId=h["HITId"], ExpireAt=future)
    assert market.client.call("get_hit", HITId=h["HITId"])["HIT"]["HITStatus"] == "Assignable"


def test_review_status_toggle(market):
    h = market.hit(max_assignments=1)
    with pytest.raises(ClientError) as ei:
        market.client.call("update_hit_review_status", HITId=h["HITId"])
    assert _turk(ei) == "AWS.MechanicalTurk.InvalidHITState"
    market.work(h["HITId"], "AWORKERONE")
    market.client.call("update_hit_review_status", HITId=h["HITId"])
    assert market.client.call("get_hit", HITId=h["HITId"])["HIT"]["HITStatus"] == "Reviewing"
    assert market.client.call("list_reviewable_hits", Status="Reviewing")["NumResults"] == 1
    market.client.call("update_hit_review_status", HITId=h["HITId"], Revert=True)
    assert market.client.call("get_hit", HITId=h["HITId"])["HIT"]["HITStatus"] == "Reviewable"


def test_additional_assignments_and_the_ten_rule(market):
    h = market.hit(max_assignments=5)
    market.client.call("create_additional_assignments_for_hit", HITId=h["HITId"], NumberOfAdditionalAssignments=4,
                       UniqueRequestToken="more-1")
    assert market.client.call("get_hit", HITId=h["HITId"])["HIT"]["MaxAssignments"] == 9
    with pytest.raises(ClientError) as ei:
        market.client.call("create_additional_assignments_for_hit", HITId=h["HITId"], NumberOfAdditionalAssignments=1,
                           UniqueRequestToken="more-1")
    assert "already been processed" in ei.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as ei:
        market.client.call("create_additional_assignments_for_hit", HITId=h["HITId"], NumberOfAdditionalAssignments=1)
    assert _turk(ei) == "AWS.MechanicalTurk.InvalidMaximumAssignmentsIncrease"
    assert market.client.call("get_hit", HITId=h["HITId"])["HIT"]["MaxAssignments"] == 9


def test_unique_request_token_remembered_24h(market):
    h = market.hit(UniqueRequestToken="post-item-1")
    with pytest.raises(ClientError) as ei:
        market.hit(UniqueRequestToken="post-item-1")
    assert _turk(ei) == "AWS.MechanicalTurk.HitAlreadyExists"
    assert re.search(r"[A-Z0-9]{30}", ei.value.response["Error"]["Message"]).group(0) == h["HITId"]
    with pytest.raises(ClientError):  # CreateHIT shares the token space
        market.client.call("create_hit", Title="t", Description="d", Reward="0.10", AssignmentDurationInSeconds=60,
                           LifetimeInSeconds=60, Question=QUESTION, UniqueRequestToken="post-item-1")
    market.clock.advance(24 * 3600 + 1)
    h2 = market.hit(UniqueRequestToken="post-item-1")
    assert h2["HITId"] != h["HITId"]


def test_pagination_default_10_max_100(market):
    """Page sizes; the token shapes of every paginated operation are in test_market_pagination.py."""
    t = market.client.call("create_hit_type", Title="t", Description="d", Reward="0.01", AssignmentDurationInSeconds=60)
    ids = [market.client.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], LifetimeInSeconds=600,
                              Question=QUESTION)["HIT"]["HITId"] for _ in range(25)]
    first = market.client.call("list_hits")
    assert first["NumResults"] == 10 and "NextToken" in first
    page = market.client.call("list_hits", MaxResults=100)
    assert page["NumResults"] == 25 and "NextToken" in page
    with pytest.raises(ClientError):
        market.client.call("list_hits", MaxResults=101)
    seen, token = [], None
    while True:
        r = market.client.call("list_hits", MaxResults=7, **({"NextToken": token} if token else {}))
        seen += [h["HITId"] for h in r["HITs"]]
        token = r.get("NextToken")
        if not token:
            break
    assert seen == ids
    assert [h["HITId"] for h in market.client.paginate("list_hits", "HITs")] == ids
    with pytest.raises(ClientError) as ei:
        market.client.call("list_hits", NextToken="garbage")
    assert _turk(ei) == "AWS.MechanicalTurk.InvalidParameterValue"


def test_restart_keeps_everything(tmp_path):
    m = _market(tmp_path)
    h = m.hit(max_assignments=2, UniqueRequestToken="persist-1")
    aid = m.work(h["HITId"], "AWORKERONE")
    m.client.call("create_worker_block", WorkerId="ABLOCKED", Reason="spam")
    m.server.stop()
    m2 = _market(tmp_path)
    try:
        assert m2.client.call("get_hit", HITId=h["HITId"])["HIT"]["NumberOfAssignmentsAvailable"] == 1
        assert m2.client.call("get_assignment", AssignmentId=aid)["Assignment"]["AssignmentStatus"] == "Submitted"
        assert m2.client.call("list_worker_blocks")["WorkerBlocks"] == [{"WorkerId": "ABLOCKED", "Reason": "spam"}]
        with pytest.raises(ClientError):
            m2.hit(max_assignments=2, UniqueRequestToken="persist-1")
    finally:
        m2.server.stop()
