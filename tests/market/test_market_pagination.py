"""MTurk's pagination on every paginated operation, read the three ways client code in the field reads it.

Real MTurk puts a `NextToken` on every page that has results, the last one included, and the page after
the last comes back empty without one. Hand-written loops depend on that (`while "NextToken" in resp`,
and `while resp["HITs"]: ... resp["NextToken"]`, which raises KeyError without it); botocore's paginator
works either way. Each operation is filled with 23 items and read 5 at a time: pages of 5, 5, 5, 5, 3,
then an empty one.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore import xform_name

from tests.market.conftest import QUESTION, Market, _market

N = 23
PAGE = 5

# The items' identity in each listing, to compare orders.
KEYS = {"HITs": "HITId", "Assignments": "AssignmentId", "WorkerBlocks": "WorkerId", "BonusPayments": "Reason",
        "QualificationTypes": "QualificationTypeId", "Qualifications": "WorkerId", "QualificationRequests": "QualificationRequestId"}


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory):
    """One requester with N of everything every paginated operation lists (built in-process, one market)."""
    m: Market = _market(tmp_path_factory.mktemp("pages"))
    c, e = m.client, m.server.engine
    expected: dict[str, list[str]] = {}
    qt = c.call("create_qualification_type", Name="Skilled", Description="d", QualificationTypeStatus="Active")["QualificationType"]
    asked = c.call("create_qualification_type", Name="Asked", Description="d", QualificationTypeStatus="Active")["QualificationType"]
    owned = [qt["QualificationTypeId"], asked["QualificationTypeId"]]
    owned += [c.call("create_qualification_type", Name=f"Type {i}", Description="d",
                     QualificationTypeStatus="Active")["QualificationType"]["QualificationTypeId"] for i in range(N - 2)]
    expected["ListQualificationTypes"] = owned
    req = [{"QualificationTypeId": qt["QualificationTypeId"], "Comparator": "Exists"}]
    t = c.call("create_hit_type", Title="t", Description="d", Reward="0.05", AssignmentDurationInSeconds=600,
               AutoApprovalDelayInSeconds=86400, QualificationRequirements=req)["HITTypeId"]
    hits = [c.call("create_hit_with_hit_type", HITTypeId=t, LifetimeInSeconds=3600, MaxAssignments=N,
                   Question=QUESTION)["HIT"]["HITId"] for _ in range(N)]
    expected["ListHITs"] = expected["ListHITsForQualificationType"] = hits
    workers = [f"AWORKER{i:02d}" for i in range(N)]
    aids = []
    for w in workers:
        e.worker("register", {"WorkerId": w})
        c.call("associate_qualification_with_worker", QualificationTypeId=qt["QualificationTypeId"], WorkerId=w,
               IntegerValue=1)
        aid = e.worker("accept", w, hits[0])["AssignmentId"]
        e.worker("submit", aid, [("assignmentId", aid), ("score", "3")])
        aids.append(aid)
        c.call("create_worker_block", WorkerId=w, Reason="r")
    expected["ListAssignmentsForHIT"] = aids
    expected["ListWorkersWithQualificationType"] = workers
    expected["ListWorkerBlocks"] = workers
    expected["ListQualificationRequests"] = [e.worker("request_qualification", w, asked["QualificationTypeId"])
                                             ["QualificationRequestId"] for w in workers]
    reasons = [f"bonus {i}" for i in range(N)]
    for r in reasons:
        c.call("send_bonus", WorkerId=workers[0], AssignmentId=aids[0], BonusAmount="0.01", Reason=r)
    expected["ListBonusPayments"] = reasons
    m.clock.advance(4000)  # every HIT expires; none has an accepted-but-unsubmitted assignment: all Reviewable
    expected["ListReviewableHITs"] = hits
    params = {
        "ListHITs": {}, "ListReviewableHITs": {}, "ListWorkerBlocks": {},
        "ListAssignmentsForHIT": {"HITId": hits[0]}, "ListBonusPayments": {"HITId": hits[0]},
        "ListQualificationTypes": {"MustBeRequestable": True, "MustBeOwnedByCaller": True},
        "ListWorkersWithQualificationType": {"QualificationTypeId": qt["QualificationTypeId"]},
        "ListHITsForQualificationType": {"QualificationTypeId": qt["QualificationTypeId"]},
        "ListQualificationRequests": {"QualificationTypeId": asked["QualificationTypeId"]},
    }
    yield m, expected, params
    m.workers.close()
    m.server.stop()


PAGINATED = ["ListHITs", "ListReviewableHITs", "ListAssignmentsForHIT", "ListBonusPayments", "ListWorkerBlocks",
             "ListQualificationTypes", "ListWorkersWithQualificationType", "ListHITsForQualificationType",
             "ListQualificationRequests"]


def _snake(op: str) -> str:
    return xform_name(op)


def test_botocore_paginates_exactly_these_operations(filled):
    raw = filled[0].client.raw
    names = {op for op in raw.meta.service_model.operation_names if raw.can_paginate(_snake(op))}
    assert names == set(PAGINATED)


def _ids(op: str, items: list[dict[str, Any]], result_key: str) -> list[str]:
    return [it[KEYS[result_key]] for it in items]


def _result_key(raw: Any, op: str) -> str:
    return next(k for k in raw.meta.service_model.operation_model(op).output_shape.members if k in KEYS)


@pytest.mark.parametrize("op", PAGINATED)
def test_loop_on_next_token_in_response(filled, op):
    m, expected, params = filled
    raw = m.client.raw
    key = _result_key(raw, op)
    call = getattr(raw, _snake(op))
    resp = call(MaxResults=PAGE, **params[op])
    sizes, items = [resp["NumResults"]], list(resp[key])
    assert "NextToken" in resp
    while "NextToken" in resp:
        resp = call(MaxResults=PAGE, NextToken=resp["NextToken"], **params[op])
        sizes.append(resp["NumResults"])
        items += resp[key]
    assert _ids(op, items, key) == expected[op]
    assert sizes == [5, 5, 5, 5, 3, 0]  # the last page with results carried a token; the empty one after it none


@pytest.mark.parametrize("op", PAGINATED)
def test_loop_while_page_non_empty_reading_next_token(filled, op):
    m, expected, params = filled
    raw = m.client.raw
    key = _result_key(raw, op)
    call = getattr(raw, _snake(op))
    items: list[dict[str, Any]] = []
    resp = call(MaxResults=PAGE, **params[op])
    while resp[key]:
        items += resp[key]
        resp = call(MaxResults=PAGE, NextToken=resp["NextToken"], **params[op])  # KeyError here if a page lacked it
    assert _ids(op, items, key) == expected[op]
    assert "NextToken" not in resp and resp["NumResults"] == 0


@pytest.mark.parametrize("op", PAGINATED)
def test_botocore_paginator(filled, op):
    m, expected, params = filled
    raw = m.client.raw
    key = _result_key(raw, op)
    pages = list(raw.get_paginator(_snake(op)).paginate(PaginationConfig={"PageSize": PAGE}, **params[op]))
    items = [it for p in pages for it in p[key]]
    assert _ids(op, items, key) == expected[op]
    assert [len(p[key]) for p in pages][:5] == [5, 5, 5, 5, 3]
    # build_full_result / MaxItems as scripts use them
    full = raw.get_paginator(_snake(op)).paginate(PaginationConfig={"PageSize": PAGE, "MaxItems": 12},
                                                  **params[op]).build_full_result()
    assert _ids(op, full[key], key) == expected[op][:12]


def test_one_page_of_everything_has_a_token_and_the_next_is_empty(filled):
    m, expected, _ = filled
    raw = m.client.raw
    resp = raw.list_hits(MaxResults=100)
    assert resp["NumResults"] == N and "NextToken" in resp
    after = raw.list_hits(MaxResults=100, NextToken=resp["NextToken"])
    assert after["NumResults"] == 0 and after["HITs"] == [] and "NextToken" not in after


def test_empty_listing_has_no_token(tmp_path):
    m = _market(tmp_path)
    try:
        resp = m.client.raw.list_hits(MaxResults=100)
        assert resp["NumResults"] == 0 and "NextToken" not in resp
    finally:
        m.workers.close()
        m.server.stop()
