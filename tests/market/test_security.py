"""Each attack of issue 14, tried as an attacker would, and refused; nothing it tried is changed.

docs/marketplace.md's "Attacks the built-in marketplace refuses" table lists these tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from campaign.market import auth
from campaign.market.server import admin_main
from campaign.market.worker_client import WorkerAPIError, WorkerClient
from campaign.marketplaces.mturk_client import make_client
from tests.market.conftest import QUESTION
from tests.support.cli import clean_env, start_campaign
from tests.support.paths import ROOT

TARGET = "MTurkRequesterServiceV20170117."


# -- helpers ------------------------------------------------------------------------------------------------
def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict, dict]:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}"), dict(r.headers)
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, (json.loads(raw) if raw[:1] == b"{" else {"raw": raw.decode("utf-8", "replace")}), dict(e.headers)


def _api(market, op: str, params: dict, *, sign: bool = True, key: str | None = None, secret: str | None = None,
         tamper: bytes | None = None) -> tuple[int, dict]:
    url = market.server.endpoint_url + "/"
    body = json.dumps(params).encode()
    headers = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": TARGET + op}
    if sign:
        creds = market.server.credentials
        headers = auth.sign_headers(url, body, headers, key or creds.access_key_id, secret or creds.secret_access_key)
    status, payload, _ = _post(url, tamper if tamper is not None else body, headers)
    return status, payload


def _raw_socket(host: str, port: int, data: bytes, shut: bool = True, wait: float = 5.0) -> bytes:
    with socket.create_connection((host, port), timeout=wait) as s:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        chunks = []
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                chunks.append(b)
        except TimeoutError:
            pass
    return b"".join(chunks)


def _hostport(url: str) -> tuple[str, int]:
    p = urllib.parse.urlsplit(url)
    return p.hostname or "127.0.0.1", p.port or 80


def _submitted(market) -> tuple[dict, str]:
    h = market.hit(max_assignments=2)
    aid = market.work(h["HITId"], "AVICTIM1")
    return h, aid


def _assignment(market, aid: str) -> dict:
    return market.client.call("get_assignment", AssignmentId=aid)["Assignment"]


# -- requester API: credentials -----------------------------------------------------------------------------
def test_unsigned_request_is_missing_authentication_token_and_changes_nothing(market):
    _, aid = _submitted(market)
    status, body = _api(market, "ApproveAssignment", {"AssignmentId": aid}, sign=False)
    assert status == 403 and body["__type"] == "MissingAuthenticationToken"
    assert _assignment(market, aid)["AssignmentStatus"] == "Submitted"


def test_forged_signature_cannot_approve_or_pay_a_bonus(market):
    _, aid = _submitted(market)
    url = market.server.endpoint_url + "/"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    forged = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Date": stamp,
              "Authorization": f"AWS4-HMAC-SHA256 Credential=x/{stamp[:8]}/us-east-1/mturk-requester/aws4_request, "
                               f"SignedHeaders=host;x-amz-date, Signature={'deadbeef' * 8}"}
    for op, params in (("ApproveAssignment", {"AssignmentId": aid}),
                       ("SendBonus", {"WorkerId": "AVICTIM1", "BonusAmount": "999.99", "AssignmentId": aid, "Reason": "x"})):
        status, body, _ = _post(url, json.dumps(params).encode(), {**forged, "X-Amz-Target": TARGET + op})
        assert status == 403 and body["__type"] == "UnrecognizedClientException"
    assert _assignment(market, aid)["AssignmentStatus"] == "Submitted"
    assert market.client.call("list_bonus_payments", AssignmentId=aid)["NumResults"] == 0


def test_unknown_key_wrong_secret_tampered_body_and_stale_time_are_refused(market):
    status, body = _api(market, "GetAccountBalance", {}, key="AKIAUNKNOWNKEY000000", secret="s" * 40)
    assert (status, body["__type"]) == (403, "UnrecognizedClientException")
    status, body = _api(market, "GetAccountBalance", {}, secret="not-the-secret")
    assert (status, body["__type"]) == (403, "InvalidSignatureException")
    status, body = _api(market, "CreateHITType", {"Title": "t", "Description": "d", "Reward": "0.10", "AssignmentDurationInSeconds": 60},
                        tamper=json.dumps({"Title": "evil", "Description": "d", "Reward": "9.99", "AssignmentDurationInSeconds": 60}).encode())
    assert (status, body["__type"]) == (403, "InvalidSignatureException")
    # a correctly signed request replayed 10 minutes late
    creds = market.server.credentials
    url = market.server.endpoint_url + "/"
    host = urllib.parse.urlsplit(url).netloc
    old = datetime.fromtimestamp(time.time() - 600, UTC).strftime("%Y%m%dT%H%M%SZ")
    headers = {"content-type": "application/x-amz-json-1.1", "host": host, "x-amz-date": old, "x-amz-target": TARGET + "GetAccountBalance"}
    signed = sorted(headers)

    class H(dict):
        def get_all(self, name, failobj=None):
            return [self[name]] if name in self else failobj

    creq = auth.canonical_request("POST", "/", "", H(headers), signed, b"{}")
    scope = f"{old[:8]}/us-east-1/mturk-requester/aws4_request"
    to_sign = "\n".join([auth.ALGORITHM, old, scope, hashlib.sha256(creq.encode()).hexdigest()])
    import hmac as _hmac

    sig = _hmac.new(auth.signing_key(creds.secret_access_key, old[:8], "us-east-1", "mturk-requester"), to_sign.encode(),
                    hashlib.sha256).hexdigest()
    headers["Authorization"] = f"AWS4-HMAC-SHA256 Credential={creds.access_key_id}/{scope}, SignedHeaders={';'.join(signed)}, Signature={sig}"
    status, body, _ = _post(url, b"{}", {k: v for k, v in headers.items() if k != "host"})
    assert status == 403 and body["__type"] == "InvalidSignatureException" and "expired" in body["message"]
    assert market.client.call("list_hits")["NumResults"] == 0


def test_account_names_with_underscore_and_dash_are_separate_accounts(market):
    alice = make_client("local", market.server.endpoint_url, credentials=market.server.add_account("alice_1"), max_rps=0)
    bob = make_client("local", market.server.endpoint_url, credentials=market.server.add_account("bob-2"), max_rps=0)
    t = alice.call("create_hit_type", Title="t", Description="d", Reward="0.10", AssignmentDurationInSeconds=60)
    alice.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], LifetimeInSeconds=600, Question=QUESTION)
    assert alice.call("list_hits")["NumResults"] == 1
    assert bob.call("list_hits")["NumResults"] == 0
    assert market.client.call("list_hits")["NumResults"] == 0


def test_environment_aws_keys_are_not_used_for_the_builtin_marketplace(market, monkeypatch):
    """Issue 15: with AWS_ACCESS_KEY_ID set, `local` still uses the marketplace's own account."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREALMTURKKEY0000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "real-secret")
    client = make_client("local", market.server.endpoint_url, credentials=market.server.credentials, max_rps=0, max_attempts=1)
    assert client.raw._get_credentials().access_key == market.server.credentials.access_key_id
    assert client.call("get_account_balance")["AvailableBalance"] == "10000.00"


@pytest.mark.slow
def test_daemon_uses_its_marketplace_account_even_with_aws_keys_in_the_environment(tmp_path, monkeypatch):
    from campaign.daemon import RunOptions, start_runtime, stop_runtime
    from campaign.marketplaces.signed_json import SignedJsonClient
    from campaign.spec import load_spec

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREALMTURKKEY0000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "real-secret")
    spec = load_spec(ROOT / "campaigns.yaml")
    rt = start_runtime(spec, RunOptions(state_dir=tmp_path / "state", campaigns=(spec.campaigns[0].name,)))
    try:
        ctx = rt.contexts[0]
        client = ctx.market.client  # the MTurk marketplace wraps the client the daemon made for its own marketplace
        assert isinstance(client, SignedJsonClient)
        assert client.signer.key_id == rt.services.site.credentials.access_key_id != "AKIAREALMTURKKEY0000"
        assert ctx.market.balance() > 0
    finally:
        stop_runtime(rt)
    secret = rt.services.site.credentials.secret_access_key
    for f in (tmp_path / "state").rglob("*"):
        if f.is_file() and f.name not in ("auth.db", "auth.db-wal"):
            assert secret.encode() not in f.read_bytes(), f"secret found in {f}"


def test_credentials_file_is_private_and_works_with_boto3_profiles(tmp_path, monkeypatch):
    state = tmp_path / "market"
    assert admin_main(["account", "add", "lab", "--state", str(state)]) == 0
    creds_file = state / "credentials"
    assert stat.S_IMODE(creds_file.stat().st_mode) == 0o600
    assert stat.S_IMODE((state / "auth.db").stat().st_mode) == 0o600
    assert admin_main(["account", "add", "lab", "--state", str(state)]) == 2  # exists already
    from campaign.market.server import start_market

    m = start_market(state)
    try:
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds_file))
        monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
        raw = boto3.session.Session(profile_name="lab").client("mturk", region_name="us-east-1", endpoint_url=m.endpoint_url,
                                                              config=Config(retries={"max_attempts": 1}))
        assert raw.get_account_balance()["AvailableBalance"] == "10000.00"
    finally:
        m.stop()


@pytest.mark.slow
def test_serve_writes_the_default_profile_and_the_aws_cli_uses_it(tmp_path):
    import shutil
    import sys

    state = tmp_path / "served"
    proc = start_campaign("market", "serve", "--port", "0", "--state", str(state), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    try:
        url = proc.stdout.readline().strip() if proc.stdout else ""
        assert url.startswith("http://127.0.0.1:")
        creds_file = state / "credentials"
        assert stat.S_IMODE(creds_file.stat().st_mode) == 0o600 and "[default]" in creds_file.read_text()
        env = clean_env(["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"], AWS_SHARED_CREDENTIALS_FILE=str(creds_file),
                        AWS_PROFILE="default", AWS_CONFIG_FILE=os.devnull)
        code = (f"import boto3; c = boto3.client('mturk', region_name='us-east-1', endpoint_url={url!r}); "
                "print(c.get_account_balance()['AvailableBalance'])")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert out.stdout.strip() == "10000.00", out.stderr
        aws = shutil.which("aws")
        if aws:  # the AWS CLI is optional; boto3 above is the same client library it uses
            out = subprocess.run([aws, "mturk", "get-account-balance", "--endpoint-url", url, "--region", "us-east-1"],
                                 env=env, capture_output=True, text=True, timeout=120)
            assert out.returncode == 0 and json.loads(out.stdout)["AvailableBalance"] == "10000.00", out.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=60)


# -- requester API: bad requests ----------------------------------------------------------------------------
def test_question_over_64k_is_a_validation_exception_without_retries(market):
    t = market.client.call("create_hit_type", Title="t", Description="d", Reward="0.10", AssignmentDurationInSeconds=60)
    big = QUESTION.replace("<input name=\"score\">", "<p>" + "x" * 70_000 + "</p><input name=\"score\">")
    patient = make_client("local", market.server.endpoint_url, credentials=market.server.credentials, max_rps=0, max_attempts=10)
    t0 = time.monotonic()
    with pytest.raises(ClientError) as ei:
        patient.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], LifetimeInSeconds=600, Question=big)
    assert time.monotonic() - t0 < 3  # a 4xx is not retried (a ServiceFault would be, for 9 s)
    assert ei.value.response["Error"]["Code"] == "ValidationException"
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert market.client.call("list_hits")["NumResults"] == 0


def test_huge_reward_is_a_validation_exception(market):
    with pytest.raises(ClientError) as ei:
        market.client.call("create_hit_type", Title="t", Description="d", Reward="99999999999999999999", AssignmentDurationInSeconds=60)
    assert ei.value.response["Error"]["Code"] == "ValidationException"
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


@pytest.mark.parametrize("url, ok", [("javascript:alert(document.domain)//", False), ("http://example.org/task", False),
                                     ("data:text/html,<script>alert(1)</script>", False), ("https://example.org/task", True),
                                     ("http://127.0.0.1:9/task", True)])
def test_external_url_must_be_https(market, url, ok):
    q = ('<ExternalQuestion xmlns="http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd">'
         f"<ExternalURL>{url.replace('&', '&amp;').replace('<', '&lt;')}</ExternalURL><FrameHeight>400</FrameHeight></ExternalQuestion>")
    t = market.client.call("create_hit_type", Title="t", Description="d", Reward="0.10", AssignmentDurationInSeconds=60)
    if ok:
        market.client.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], LifetimeInSeconds=600, Question=q)
        assert market.client.call("list_hits")["NumResults"] == 1
        return
    with pytest.raises(ClientError) as ei:
        market.client.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], LifetimeInSeconds=600, Question=q)
    assert ei.value.response.get("TurkErrorCode") == "AWS.MechanicalTurk.XMLParseError"
    assert market.client.call("list_hits")["NumResults"] == 0


def test_deeply_nested_json_is_a_4xx(market):
    status, body = _api(market, "CreateHITType", {}, tamper=None)
    assert status == 400  # sanity: missing members
    url = market.server.endpoint_url + "/"
    deep = b'{"Title": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    creds = market.server.credentials
    headers = auth.sign_headers(url, deep, {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": TARGET + "CreateHITType"},
                                creds.access_key_id, creds.secret_access_key)
    status, body, _ = _post(url, deep, headers)
    assert 400 <= status < 500 and "SerializationException" in body["__type"]
    # the worker JSON API too
    market.workers.register("ADEEP")
    sess = market.workers._sessions["ADEEP"]
    status, body, _ = _post(market.server.endpoint_url + "/worker/api/accept", deep,
                            {"Content-Type": "application/json", "Cookie": f"mkt_session={sess[0]}", "X-CSRF-Token": sess[1]})
    assert 400 <= status < 500


def test_content_length_not_a_number_gets_a_400_answer(market):
    host, port = _hostport(market.server.endpoint_url)
    reply = _raw_socket(host, port, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}")
    assert reply.startswith(b"HTTP/1.1 400") and b"SerializationException" in reply


def test_body_shorter_than_content_length_is_refused_and_nothing_is_stored(market):
    h = market.hit()
    market.workers.register("ATRUNC1")
    aid = market.workers.accept("ATRUNC1", h["HITId"])["AssignmentId"]
    body = urllib.parse.urlencode({"assignmentId": aid, "score": "5" * 100}).encode()
    for origin in (market.server.content_url, market.server.endpoint_url):
        host, port = _hostport(origin)
        req = (b"POST /mturk/externalSubmit HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
               b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body[: len(body) // 2])
        reply = _raw_socket(host, port, req)
        assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
    assert market.client.call("list_assignments_for_hit", HITId=h["HITId"])["NumResults"] == 0
    market.workers.submit(aid, [("score", "5")])  # the assignment is still open: nothing was stored
    assert market.client.call("list_assignments_for_hit", HITId=h["HITId"])["NumResults"] == 1


def test_client_disconnects_print_no_tracebacks(market, capfd):
    host, port = _hostport(market.server.endpoint_url)
    for data in (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{", b"GET /worker HT", b"POST / HTTP/1.1\r\n"):
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(data)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on close
    time.sleep(0.5)
    assert market.client.call("get_account_balance")["AvailableBalance"] == "10000.00"
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception" not in err


# -- workers ------------------------------------------------------------------------------------------------
def test_workers_cannot_register_themselves_or_declare_a_profile(market):
    status, body, _ = _post(market.server.endpoint_url + "/worker/api/register",
                            json.dumps({"WorkerId": "AFAKEMASTER", "Locale": {"Country": "US"}, "PercentAssignmentsApproved": 100,
                                        "Masters": True}).encode(), {"Content-Type": "application/json"})
    assert status == 403 and body["error"] == "RegistrationClosed"
    from campaign.market.engine import WorkerError

    with pytest.raises(WorkerError) as ei:  # the worker was not created
        market.server.engine.worker("available", "AFAKEMASTER", 10)
    assert ei.value.code == "UnknownWorker"


def test_nobody_acts_as_a_worker_by_naming_it(market):
    h = market.hit()
    market.workers.register("AVICTIM2")
    url = market.server.endpoint_url
    status, body, _ = _post(url + "/worker/api/accept", json.dumps({"WorkerId": "AVICTIM2", "HITId": h["HITId"]}).encode(),
                            {"Content-Type": "application/json"})
    assert status == 401 and body["error"] == "NotSignedIn"
    req = urllib.request.Request(url + "/worker?workerId=AVICTIM2")
    with urllib.request.urlopen(req, timeout=10) as r:  # redirected to the sign-in page
        page = r.read().decode()
        assert "Sign in" in page and h["HITId"] not in page
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(url + "/worker/api/hits?workerId=AVICTIM2", timeout=10)
    assert ei.value.code == 401
    # another signed-in worker cannot use the victim's id either
    other = WorkerClient(url)
    other.register("AOTHER1")
    with pytest.raises(WorkerAPIError) as wi:
        other._json("POST", "/worker/api/accept", {"WorkerId": "AVICTIM2", "HITId": h["HITId"]}, worker_id="AOTHER1")
    assert wi.value.code == "NotYourSession"
    assert market.client.call("list_assignments_for_hit", HITId=h["HITId"])["NumResults"] == 0


def test_sign_in_codes_cookies_and_csrf(market):
    url = market.server.endpoint_url
    code = market.server.add_worker("ALABWORKER", country="DE", masters=True)
    status, body, _ = _post(url + "/worker/api/signin", json.dumps({"Code": "wrong"}).encode(), {"Content-Type": "application/json"})
    assert status == 403
    req = urllib.request.Request(url + "/signin", data=urllib.parse.urlencode({"code": code}).encode(), method="POST")

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as ei:
        opener.open(req, timeout=10)
    assert ei.value.code == 303
    cookie = ei.value.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/" in cookie
    token = cookie.split(";")[0].split("=", 1)[1]
    h = market.hit()
    form = urllib.parse.urlencode({"hitId": h["HITId"]}).encode()  # no CSRF token
    status, _, _ = _post(url + "/worker/accept", form, {"Cookie": f"mkt_session={token}"})
    assert status == 403
    form = urllib.parse.urlencode({"hitId": h["HITId"], "csrf": "guess"}).encode()
    status, _, _ = _post(url + "/worker/accept", form, {"Cookie": f"mkt_session={token}"})
    assert status == 403
    # a cross-site POST with the right cookie (the browser sends it) but a foreign Origin
    status, _, _ = _post(url + "/signin", urllib.parse.urlencode({"code": code}).encode(), {"Origin": "https://evil.example"})
    assert status == 403
    assert market.client.call("list_assignments_for_hit", HITId=h["HITId"])["NumResults"] == 0
    # a re-issued code replaces the old one
    market.server.add_worker("ALABWORKER")
    status, _, _ = _post(url + "/worker/api/signin", json.dumps({"Code": code}).encode(), {"Content-Type": "application/json"})
    assert status == 403


# -- isolation ----------------------------------------------------------------------------------------------
def test_requester_html_never_renders_on_the_worker_origin(market):
    h = market.hit()
    url = market.server.endpoint_url
    q = urllib.parse.urlencode({"hitId": h["HITId"], "assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"})
    with urllib.request.urlopen(f"{url}/worker/frame?{q}", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        assert r.headers["X-Content-Type-Options"] == "nosniff" and "sandbox" in r.headers["Content-Security-Policy"]
    market.workers.register("AISO1")
    aid = market.workers.accept("AISO1", h["HITId"])["AssignmentId"]
    sess = market.workers._sessions["AISO1"]
    req = urllib.request.Request(f"{url}/worker/api/task?assignmentId={aid}", headers={"Cookie": f"mkt_session={sess[0]}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain") and "sandbox" in r.headers["Content-Security-Policy"]
    req = urllib.request.Request(f"{url}/worker/work?assignmentId={aid}", headers={"Cookie": f"mkt_session={sess[0]}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        page = r.read().decode()
        csp = r.headers["Content-Security-Policy"]
    assert 'sandbox="allow-scripts allow-forms"' in page and "allow-same-origin" not in page
    assert market.server.content_url + "/hit?" in page.replace("&amp;", "&")
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
    assert urllib.parse.urlsplit(market.server.content_url).port != urllib.parse.urlsplit(url).port
    # the content origin serves only frame links the worker site signed, with a sandbox CSP
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(f"{market.server.content_url}/hit?hitId={h['HITId']}&assignmentId={aid}", timeout=10)
    assert ei.value.code == 403
    src = market.server.core.site.config.frame_src(h["HITId"], aid, "AISO1")
    with urllib.request.urlopen(src, timeout=10) as r:
        assert "sandbox allow-scripts allow-forms" in r.headers["Content-Security-Policy"]
        assert "allow-same-origin" not in r.headers["Content-Security-Policy"]
    # and the worker API is not on the content origin
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(f"{market.server.content_url}/worker/api/hits", timeout=10)
    assert ei.value.code == 404


def test_bidi_controls_are_inert_in_the_worker_list(market):
    t = market.client.call("create_hit_type", Title="Rate \u202estatements\u202c now", Description="d\u2067x",
                           Reward="0.10", AssignmentDurationInSeconds=600)
    market.client.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], LifetimeInSeconds=600, Question=QUESTION)
    market.workers.register("ABIDI1")
    sess = market.workers._sessions["ABIDI1"]
    req = urllib.request.Request(market.server.endpoint_url + "/worker", headers={"Cookie": f"mkt_session={sess[0]}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        page = r.read().decode()
    assert "Rate statements now" in page and "\u202e" not in page and "\u2067" not in page
    assert "<bdi>Rate statements now</bdi>" in page
    assert "10 min" in page and "$0.10" in page and market.server.account in page  # time allotted, reward, requester


def test_operator_commands_add_a_worker_who_signs_in_with_the_printed_code(tmp_path, capsys):
    from campaign.market.server import start_market
    from tests.support.cli import cli

    state = tmp_path / "market"
    assert cli("market", "worker", "add", "AOPERATED1", "--state", state, "--country", "DE", "--approval", "97",
               "--approved", "1200", "--masters", "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["WorkerId"] == "AOPERATED1" and out["link"].endswith(urllib.parse.urlencode({"code": out["code"]}))
    assert cli("market", "worker", "add", "not-a-worker-id", "--state", str(state)) == 2
    m = start_market(state)
    try:
        w = WorkerClient(m.endpoint_url, operator=None)
        assert w.sign_in(out["code"]) == "AOPERATED1"
        client = make_client("local", m.endpoint_url, credentials=m.credentials, max_rps=0)
        masters_de = [{"QualificationTypeId": "2ARFPLSP75KLA8M8DH1HTEQVJT3SY6", "Comparator": "Exists"},
                      {"QualificationTypeId": "00000000000000000071", "Comparator": "EqualTo", "LocaleValues": [{"Country": "DE"}]}]
        t = client.call("create_hit_type", Title="t", Description="d", Reward="0.10", AssignmentDurationInSeconds=60,
                        QualificationRequirements=masters_de)
        h = client.call("create_hit_with_hit_type", HITTypeId=t["HITTypeId"], LifetimeInSeconds=600, Question=QUESTION)["HIT"]
        assert [x["HITId"] for x in w.available("AOPERATED1")] == [h["HITId"]]  # the operator's profile counts
    finally:
        m.stop()
    with pytest.raises(WorkerAPIError) as ei:  # outside the process that runs the marketplace: no operator
        WorkerClient(m.endpoint_url).register("ASELFMADE")
    assert ei.value.code == "NoOperator"


def test_serving_on_a_public_address_needs_its_public_urls(capsys):
    from campaign.market.server import main

    assert main(["--host", "0.0.0.0", "--port", "0", "--state", "/nonexistent/never-created"]) == 2
    assert "--public-url" in capsys.readouterr().err
