"""The client the daemon speaks to the built-in marketplace with, beside boto3: the same answers, the
same errors, botocore's retries, kept-alive connections that go stale, credentials never shown.
(tests/marketplaces/conftest.py runs every `MTurkMarketplace` test over both clients too.)"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import BotoCoreError, ClientError

from campaign.credentials import Credentials
from campaign.market.worker_client import WorkerClient
from campaign.marketplaces.base import MarketError, TransientError
from campaign.marketplaces.mturk import MTurkMarketplace, translate
from campaign.marketplaces.mturk_client import MarketClient
from campaign.marketplaces.signed_json import SignedJsonClient, open_signed_json
from tests.support.market import FORM_PAGE, AccountView, SharedMarkets


@pytest.fixture
def both(shared_markets: SharedMarkets) -> Iterator[tuple[AccountView, MarketClient, SignedJsonClient]]:
    shared = shared_markets.get("prod", "100.00")
    with shared.account() as (server, boto):
        lean = SignedJsonClient(server.endpoint_url, server.credentials, max_attempts=3)
        lean.sleep = lambda _s: None  # retries without waiting
        try:
            yield server, boto, lean
        finally:
            lean.close()


def _plain(value: Any) -> Any:
    """An answer with boto3's datetimes as the epoch seconds the wire carries."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "ResponseMetadata"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.timestamp()
    return value


def _hit(client: Any) -> dict[str, Any]:
    t = client.call("create_hit_type", Title="Rate", Description="Judge", Reward="0.10", AssignmentDurationInSeconds=600,
                    AutoApprovalDelayInSeconds=3600)
    return client.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], MaxAssignments=2, LifetimeInSeconds=3600,
                       Question=f'<HTMLQuestion xmlns="http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/'
                                f'2011-11-11/HTMLQuestion.xsd"><HTMLContent><![CDATA[{FORM_PAGE}]]></HTMLContent>'
                                f'<FrameHeight>0</FrameHeight></HTMLQuestion>')["HIT"]


def test_its_answers_are_boto3s_with_timestamps_as_sent(both):
    server, boto, lean = both
    hit = _hit(lean)
    workers = WorkerClient(server.endpoint_url)
    try:
        workers.register("AWORKER0000001")
        aid = workers.accept("AWORKER0000001", hit["HITId"])["AssignmentId"]
        workers.submit(aid, [("assignmentId", aid), ("answer", "x")])
    finally:
        workers.close()
    for op, params in [("get_hit", {"HITId": hit["HITId"]}), ("get_assignment", {"AssignmentId": aid}),
                       ("get_account_balance", {})]:
        assert _plain(lean.call(op, **params)) == _plain(boto.call(op, **params)), op
    listed = list(lean.paginate("list_assignments_for_hit", "Assignments", HITId=hit["HITId"]))
    assert _plain(listed) == _plain(list(boto.paginate("list_assignments_for_hit", "Assignments", HITId=hit["HITId"])))
    assert [a["AssignmentId"] for a in listed] == [aid]
    # a datetime argument goes as epoch seconds, as boto3 sends it
    later = int(lean.call("get_hit", HITId=hit["HITId"])["HIT"]["CreationTime"]) + 7200
    lean.call("update_expiration_for_hit", HITId=hit["HITId"], ExpireAt=datetime.fromtimestamp(later, UTC))
    assert boto.call("get_hit", HITId=hit["HITId"])["HIT"]["Expiration"].timestamp() == later


@pytest.mark.parametrize("n", [3, 100, 101])
def test_pages_follow_next_token_100_at_a_time_and_stop_at_a_short_one(both, n):
    """boto3 asks once more for the empty page MTurk's last token leads to; this client stops at a short
    page, as the built-in marketplace's pages are full but for the last (a full last page still costs
    the empty one)."""
    _server, boto, lean = both
    t = lean.call("create_hit_type", Title="Rate", Description="Judge", Reward="0.10", AssignmentDurationInSeconds=600,
                  AutoApprovalDelayInSeconds=3600)["HITTypeId"]
    question = boto.call("get_hit", HITId=_hit(lean)["HITId"])["HIT"]["Question"]
    for _ in range(n - 1):
        lean.call("create_hit_with_hit_type", HITTypeId=t, MaxAssignments=1, LifetimeInSeconds=3600, Question=question)
    sent = lean.attempts
    got = [h["HITId"] for h in lean.paginate("list_hits", "HITs")]
    assert len(got) == n and got == [h["HITId"] for h in boto.paginate("list_hits", "HITs")]
    assert lean.attempts - sent == n // 100 + 1


def test_errors_are_botocores_with_the_same_parts(both):
    _server, boto, lean = both
    caught = []
    for client in (boto, lean):
        with pytest.raises(ClientError) as info:
            client.call("approve_assignment", AssignmentId="A" * 30)
        caught.append(info.value)
    b, j = (translate(e) for e in caught)
    assert type(b) is type(j) and (b.code, b.detail) == (j.code, j.detail) and b.code == "RequestError"
    assert j.detail.endswith("DoesNotExist") or j.detail  # MTurk's TurkErrorCode comes through
    assert caught[1].response["Error"]["Code"] == caught[0].response["Error"]["Code"]
    assert lean.attempts == 1  # a refusal is not tried again


def test_faults_and_throttling_are_tried_again_then_raised_as_transient(both):
    server, _boto, lean = both
    server.set_faults(fault_rate=1.0)
    before = lean.attempts
    with pytest.raises(ClientError) as info:
        lean.call("get_account_balance")
    assert lean.attempts - before == 3  # max_attempts in all
    assert isinstance(translate(info.value), TransientError)
    server.set_faults(fault_rate=0.0, throttle_rate=0.001, throttle_burst=0.0)
    with pytest.raises(ClientError) as info:
        lean.call("get_account_balance")
    err = translate(info.value)
    assert isinstance(err, TransientError) and err.throttled
    server.set_faults(fault_rate=0.0, throttle_rate=0.0)
    assert Decimal(lean.call("get_account_balance")["AvailableBalance"]) > 0


def test_a_wrong_key_is_refused_and_not_tried_again(both):
    server, _boto, _lean = both
    wrong = SignedJsonClient(server.endpoint_url, Credentials(server.credentials.access_key_id, "not-the-secret"))
    with pytest.raises(ClientError) as info:
        wrong.call("get_account_balance")
    assert info.value.response["Error"]["Code"] == "InvalidSignatureException" and wrong.attempts == 1
    err = translate(info.value)
    assert isinstance(err, MarketError) and not isinstance(err, TransientError)
    assert "not-the-secret" not in repr(wrong) and "not-the-secret" not in repr(wrong.signer)


def test_each_attempt_carries_its_own_signature(both):
    """The marketplace answers a state-changing signature seen before with the first answer: a retry must
    be a new request (its nonce signed), or a retried call would do nothing."""
    server, _boto, lean = both
    a = dict(lean.signer.headers("MTurkRequesterServiceV20170117.ApproveAssignment", b"{}", now=1_800_000_000))
    b = dict(lean.signer.headers("MTurkRequesterServiceV20170117.ApproveAssignment", b"{}", now=1_800_000_000))
    assert a["Authorization"] != b["Authorization"] and "x-campaign-nonce" in a["Authorization"]
    assert a["Host"] == server.endpoint_url.split("//")[1]


def _one_answer_then_close(n_connections: int) -> tuple[str, list[int]]:
    """A server that answers one request per connection and then closes it without saying so (no
    `Connection: close`): the client's kept connection is stale at its next request."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    served: list[int] = []

    def run() -> None:
        for _ in range(n_connections):
            conn, _addr = srv.accept()
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
                while len(body) < length:
                    body += conn.recv(65536)
                reply = b'{"AvailableBalance":"1.00"}'
                served.append(1)  # before answering: the client may look as soon as it has the answer
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: "
                             + str(len(reply)).encode() + b"\r\n\r\n" + reply)
        srv.close()

    threading.Thread(target=run, daemon=True).start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}", served


def test_a_kept_connection_the_server_closed_is_replaced_without_counting_as_a_retry():
    url, served = _one_answer_then_close(2)
    client = SignedJsonClient(url, Credentials("AKIDEXAMPLE0000000000", "secret"), max_attempts=1)
    assert client.call("get_account_balance") == {"AvailableBalance": "1.00"}
    assert client.call("get_account_balance") == {"AvailableBalance": "1.00"}  # its kept connection was closed
    assert len(served) == 2 and client.attempts == 2
    client.close()


def test_nobody_listening_is_connection_trouble():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    client = SignedJsonClient(f"http://127.0.0.1:{port}", Credentials("AKIDEXAMPLE0000000000", "secret"), max_attempts=2)
    client.sleep = lambda _s: None
    with pytest.raises(BotoCoreError) as info:
        client.call("get_account_balance")
    assert client.attempts == 2 and isinstance(translate(info.value), TransientError)
    assert isinstance(MTurkMarketplace(client), MTurkMarketplace)


def test_what_it_will_not_send(tmp_path):
    client = SignedJsonClient("http://127.0.0.1:1", Credentials("AKIDEXAMPLE0000000000", "secret"))
    with pytest.raises(ValueError, match="not an operation"):
        client.call("delete_everything")
    with pytest.raises(TypeError, match="Decimal"):
        client.call("send_bonus", BonusAmount=Decimal("0.10"))  # money goes as text
    assert client.attempts == 0
    with pytest.raises(ValueError, match="http"):
        SignedJsonClient("ftp://example", Credentials("AKIDEXAMPLE0000000000", "secret"))
    (tmp_path / "credentials").write_text("[default]\naws_access_key_id = AKIDFILE\naws_secret_access_key = s3cret\n")
    from_file = open_signed_json("http://127.0.0.1:1", credentials_file=tmp_path / "credentials", retry_mode="standard")
    assert "AKIDFILE" in from_file.signer.headers("T", b"")[-1][1] and "s3cret" not in repr(from_file)
