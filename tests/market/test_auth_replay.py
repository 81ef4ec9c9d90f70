"""Issue 25, signatures: a captured request can neither be pointed at another operation or server nor
be sent again to change state twice."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import urllib.parse
from datetime import UTC, datetime

import pytest

from campaign.bench.market_client import SignedClient
from campaign.market import auth
from tests.market.test_security import TARGET, _assignment, _submitted

CT = "application/x-amz-json-1.1"


class _H(dict):
    def get_all(self, name, failobj=None):
        return [self[name]] if name in self else failobj


def _signed(market, op: str, body: bytes, signed: list[str], host: str | None = None) -> dict[str, str]:
    """Headers of a request signed by hand over exactly the header names in `signed`."""
    creds = market.server.credentials
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    headers = {"content-type": CT, "host": host or urllib.parse.urlsplit(market.server.endpoint_url).netloc,
               "x-amz-date": stamp, "x-amz-target": TARGET + op}
    creq = auth.canonical_request("POST", "/", "", _H(headers), sorted(signed), body)
    scope = f"{stamp[:8]}/us-east-1/mturk-requester/aws4_request"
    to_sign = "\n".join([auth.ALGORITHM, stamp, scope, hashlib.sha256(creq.encode()).hexdigest()])
    sig = hmac.new(auth.signing_key(creds.secret_access_key, stamp[:8], "us-east-1", "mturk-requester"), to_sign.encode(),
                   hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={creds.access_key_id}/{scope}, "
                                f"SignedHeaders={';'.join(sorted(signed))}, Signature={sig}")
    return headers


def _send(market, body: bytes, headers: dict[str, str]) -> tuple[int, dict]:
    """Sends exactly these headers (Host included, as given) over a fresh connection."""
    p = urllib.parse.urlsplit(market.server.endpoint_url)
    conn = http.client.HTTPConnection(p.hostname, p.port, timeout=10)
    try:
        conn.putrequest("POST", "/", skip_host=True, skip_accept_encoding=True)
        for k, v in {**headers, "content-length": str(len(body))}.items():
            conn.putheader(k, v)
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")
    finally:
        conn.close()


def test_a_signature_without_the_target_cannot_be_moved_to_another_operation(market):
    _, aid = _submitted(market)
    body = json.dumps({"AssignmentId": aid}).encode()
    headers = _signed(market, "GetAssignment", body, ["host", "x-amz-date"])
    assert _send(market, body, headers)[0] == 403  # even for what it was signed for: the target must be signed
    headers["x-amz-target"] = TARGET + "ApproveAssignment"
    status, out = _send(market, body, headers)
    assert (status, out["__type"]) == (403, "InvalidSignatureException") and "x-amz-target" in out["message"]
    assert _assignment(market, aid)["AssignmentStatus"] == "Submitted"


def test_a_request_signed_for_another_host_is_refused(market):
    h = market.hit()
    body = json.dumps({"HITId": h["HITId"], "ExpireAt": 0}).encode()
    headers = _signed(market, "UpdateExpirationForHIT", body, ["content-type", "host", "x-amz-date", "x-amz-target"],
                      host="evil.example")
    status, out = _send(market, body, headers)
    assert (status, out["__type"]) == (403, "InvalidSignatureException") and "Host" in out["message"]
    assert market.client.call("get_hit", HITId=h["HITId"])["HIT"]["HITStatus"] == "Assignable"
    # the same request signed for the address the server listens on is accepted
    headers = _signed(market, "GetAccountBalance", b"{}", ["content-type", "host", "x-amz-date", "x-amz-target"])
    assert _send(market, b"{}", headers)[0] == 200


def test_a_replayed_bonus_pays_once(market):
    _, aid = _submitted(market)
    body = json.dumps({"WorkerId": "AVICTIM1", "BonusAmount": "1.00", "AssignmentId": aid, "Reason": "thanks"}).encode()
    headers = _signed(market, "SendBonus", body, ["content-type", "host", "x-amz-date", "x-amz-target"])
    results = [_send(market, body, headers) for _ in range(3)]
    assert [s for s, _ in results] == [200, 200, 200]  # the copies get the first answer: nothing is done again
    assert market.client.call("list_bonus_payments", AssignmentId=aid)["NumResults"] == 1
    # a copy with its body changed fails the signature, and does not release the signature for a later copy
    status, out = _send(market, body.replace(b"1.00", b"9.00"), headers)
    assert (status, out["__type"]) == (403, "InvalidSignatureException")
    assert _send(market, body, headers)[0] == 200
    assert market.client.call("list_bonus_payments", AssignmentId=aid)["NumResults"] == 1


def test_a_copy_of_a_refused_request_runs_again(market):
    """A first attempt that changed nothing (here: an unknown HIT) is forgotten, so a retry of the same
    signed request (boto3 re-sends one unchanged within the same second) is judged afresh."""
    body = json.dumps({"HITId": "NOSUCHHIT0000000000000000000000", "ExpireAt": 0}).encode()
    headers = _signed(market, "UpdateExpirationForHIT", body, ["content-type", "host", "x-amz-date", "x-amz-target"])
    first, second = _send(market, body, headers), _send(market, body, headers)
    assert first[0] == second[0] == 400 and first[1]["__type"] == second[1]["__type"]


def test_reads_may_be_repeated_and_boto3_and_the_bench_client_sign_every_call_anew(market):
    headers = _signed(market, "GetAccountBalance", b"{}", ["content-type", "host", "x-amz-date", "x-amz-target"])
    assert [_send(market, b"{}", headers)[0] for _ in range(3)] == [200, 200, 200]
    # identical state-changing calls in the same second: boto3 and the bench client both get through
    kw = {"Title": "same", "Description": "same", "Reward": "0.10", "AssignmentDurationInSeconds": 60}
    ids = {market.client.call("create_hit_type", **kw)["HITTypeId"] for _ in range(3)}
    assert len(ids) == 1
    bench = SignedClient(market.server.endpoint_url, market.server.credentials)
    for _ in range(3):
        bench.call("CreateHITType", **kw)


def test_the_replay_cache_forgets_expired_signatures_and_is_bounded():
    cache = auth.ReplayCache(capacity=2)
    cache.WAIT = 0.05
    cache.first_use("aa" * 32, until=100.0, now=0.0)
    with pytest.raises(auth.ApiError) as ei:  # still running: the copy waits, then is refused
        cache.first_use("aa" * 32, until=100.0, now=50.0)
    assert ei.value.status == 403 and ei.value.body["__type"] == "InvalidSignatureException"
    cache.settle("aa" * 32, 200, {"ok": 1})
    with pytest.raises(auth.Replayed) as ei:
        cache.first_use("aa" * 32, until=100.0, now=50.0)
    assert (ei.value.status, ei.value.body) == (200, {"ok": 1})
    cache.first_use("bb" * 32, until=200.0, now=50.0)
    cache.settle("bb" * 32, 200, {})
    with pytest.raises(auth.ApiError) as ei:  # full of live signatures: refuse (retryable) rather than forget one
        cache.first_use("cc" * 32, until=200.0, now=60.0)
    assert ei.value.status == 400 and ei.value.body["__type"].endswith("ThrottlingException")
    cache.first_use("cc" * 32, until=300.0, now=150.0)  # "aa" has expired and made room
    cache.settle("cc" * 32, 400, {})  # changed nothing: forgotten
    assert len(cache) == 1
    cache.first_use("aa" * 32, until=400.0, now=250.0)  # past its window a signature is forgotten (time refuses it)
    # an entry whose request never settled (it died) does not outlive its window either
    fresh = auth.ReplayCache(capacity=1)
    fresh.first_use("dd" * 32, until=10.0, now=0.0)
    fresh.first_use("ee" * 32, until=30.0, now=20.0)
    assert len(fresh) == 1


def test_hosts_a_server_answers_to():
    s = auth.Signing.for_urls("http://127.0.0.1:8765", "https://market.example.org")
    assert s.answers_to("127.0.0.1:8765") and s.answers_to("localhost:8765") and s.answers_to("LOCALHOST:8765")
    assert s.answers_to("market.example.org") and s.answers_to("market.example.org:443")
    assert not s.answers_to("evil.example") and not s.answers_to("127.0.0.1:9999") and not s.answers_to("")
    assert not s.answers_to("user@127.0.0.1:8765") and not s.answers_to("127.0.0.1:8765/x")


def test_the_replay_cache_keeps_a_posting_burst_of_large_answers_and_replays_them_exactly():
    # a CreateHIT answer carries the HIT's question: at the scale bench's 5 items about 5.5 KB of JSON, so
    # 10,000 HITs posted within the window filled 64 MiB kept as they are, and every state change of the
    # account was throttled until the window passed (seen at 94,000 propositions). Kept compressed, a burst
    # of that size fits in what 3,000 of them took before.
    question = "".join(f"<p class='item'>Statement {i}: the river water was tested &amp; found clean.</p>"
                       for i in range(60))
    answers = [{"HIT": {"HITId": f"{k:030d}", "Question": question + str(k)}} for k in range(200)]
    raw = sum(len(json.dumps(a).encode()) + 200 for a in answers)
    cache = auth.ReplayCache(capacity=1000, max_bytes=raw // 3)
    for k, answer in enumerate(answers):
        sig = f"{k:064x}"
        cache.first_use(sig, until=1000.0, now=0.0)
        cache.settle(sig, 200, answer)
    assert len(cache) == len(answers)
    for k in (0, 77, 199):
        with pytest.raises(auth.Replayed) as ei:
            cache.first_use(f"{k:064x}", until=1000.0, now=1.0)
        assert (ei.value.status, ei.value.body) == (200, answers[k])
