"""The bench's light requester client signs every request for real: the server accepts it exactly when
boto3 would be accepted, and nothing about the request is taken on trust."""

from __future__ import annotations

import pytest

from campaign.bench.market_client import RequestFailed, SignedClient
from campaign.credentials import Credentials
from campaign.market.server import start_market


@pytest.fixture
def market(tmp_path):
    m = start_market(tmp_path / "market")
    yield m
    m.stop()


def test_signed_calls_work_and_pages_end_like_botocore(market):
    c = SignedClient(market.endpoint_url, market.credentials)
    assert c.call("GetAccountBalance")["AvailableBalance"] == "10000.00"
    type_id = c.call("CreateHITType", Title="t", Description="d", Reward="0.05", AssignmentDurationInSeconds=600)["HITTypeId"]
    question = ('<HTMLQuestion xmlns="http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2011-11-11/HTMLQuestion.xsd">'
                '<HTMLContent><![CDATA[<p>x</p>]]></HTMLContent><FrameHeight>0</FrameHeight></HTMLQuestion>')
    for i in range(3):
        c.call("CreateHITWithHITType", HITTypeId=type_id, LifetimeInSeconds=600, Question=question, UniqueRequestToken=f"u{i}")
    pages = list(c.pages("ListHITs", page_size=2))
    assert [len(p["HITs"]) for p in pages] == [2, 1, 0]  # a token on every non-empty page, then an empty one
    assert c.call("ListHITs")["NumResults"] == 3


def test_wrong_secret_or_unknown_key_is_refused(market):
    wrong = SignedClient(market.endpoint_url, Credentials(market.credentials.access_key_id, "x" * 40))
    with pytest.raises(RequestFailed) as ei:
        wrong.call("GetAccountBalance")
    assert ei.value.status == 403 and ei.value.code == "InvalidSignatureException"
    unknown = SignedClient(market.endpoint_url, Credentials("AKIA" + "Z" * 16, market.credentials.secret_access_key))
    with pytest.raises(RequestFailed) as ei:
        unknown.call("GetAccountBalance")
    assert ei.value.status == 403 and ei.value.code == "UnrecognizedClientException"
