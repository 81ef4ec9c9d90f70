"""Every request body reader is total: any bytes give the request's data or a 4xx, never another
exception (a 500, or a stored answer nobody can read back). Property tests feed each reader arbitrary
bytes and text; HTTP tests check both origins refuse a control character the same way, with a message
the worker sees, and change nothing."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from campaign.market import auth
from campaign.market.engine import WorkerError
from campaign.market.prolific_site import _json_body, submitted_fields
from campaign.market.protocol import ApiError, parse_json_object
from campaign.market.worker_site import form_fields
from campaign.prolific.emulator.engine import ApiError as EmulatorError
from campaign.prolific.emulator.server import read_json_body
from campaign.untrusted import text_problem
from tests.market.test_security import TARGET, _post

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
NASTY = st.sampled_from(["\x00", "\x1b", "\x7f", "\x85", "\ud800", "\udfff", "\ufffe", "\r", "%00", "%1B", "%FF", "%ED%A0%80",
                         "\\ud800", "\\u0000", "NaN", "1e999", "9" * 50, "&", "=", "+", "%"])
CHARS = st.characters(exclude_categories=())
TEXT = st.lists(st.one_of(st.text(CHARS, max_size=8), NASTY), max_size=8).map("".join)
BIG = st.builds(lambda s, n: s * n, st.text(CHARS, min_size=1, max_size=4), st.integers(1, 1 << 18))
JSONISH = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT),
                       lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
                       max_leaves=20).map(lambda v: json.dumps(v, allow_nan=True))
DEEP = st.builds(lambda n, open_: open_ * n, st.integers(60, 100_000), st.sampled_from(["[", '{"a":', "[{\"a\":"]))
BODIES = st.one_of(st.binary(max_size=300), TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")),
                   st.one_of(JSONISH, DEEP, BIG).map(lambda t: t.encode("utf-8", "surrogatepass")),
                   st.builds(lambda n, v: urllib.parse.urlencode({"assignmentId": "A1", n: v}, encoding="utf-8",
                                                          errors="surrogatepass").encode("ascii"),
                             TEXT, TEXT))
DEEP_BODY = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def _clean(value: Any) -> bool:
    """Nothing the doors refuse: only finite numbers, and text without lone surrogates."""
    if isinstance(value, str):
        return not any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return all(_clean(k) and _clean(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_clean(v) for v in value)
    return value is None or isinstance(value, (bool, int))


@SETTINGS
@given(raw=BODIES)
@example(raw=DEEP_BODY)
@example(raw=b'{"Title": 1' + b"0" * 5000 + b"}")
@example(raw=b'{"Title": "\\ud800"}')
@example(raw=b'{"ExpireAt": NaN}')
@example(raw=b'{"ExpireAt": 1e999}')
@example(raw=b"\xef\xbb\xbf{}")
def test_the_requester_api_body_is_an_object_or_a_serialization_exception(raw: bytes) -> None:
    try:
        body = parse_json_object(raw)
    except ApiError as exc:
        assert exc.status == 400 and "SerializationException" in exc.body["__type"]
        return
    assert isinstance(body, dict) and _clean(body)


@SETTINGS
@given(raw=BODIES)
@example(raw=DEEP_BODY)
@example(raw=b'{"fields": [["rating-0", "4\\u0000"]]}')
def test_the_prolific_door_and_emulator_bodies_are_json_or_a_400(raw: bytes) -> None:
    try:
        d = _json_body(raw)
    except WorkerError as exc:
        assert exc.status == 400 and exc.message
    else:
        assert isinstance(d, dict) and _clean(d)
        try:
            fields = submitted_fields(d.get("fields"))
        except WorkerError as exc:
            assert exc.status == 400 and exc.message
        else:
            assert all(text_problem(n) is None and text_problem(v) is None for n, v in fields)
    try:
        v = read_json_body(raw)
    except EmulatorError as exc:
        assert exc.status == 400
    else:
        assert _clean(v)


@settings(SETTINGS, max_examples=60)
@given(fields=st.lists(st.tuples(TEXT, TEXT), max_size=4), raw=st.binary(max_size=200))
@example(fields=[("comment", "x" * (1 << 20) + "é")], raw=b"c=" + b"%00" * (1 << 16))  # 1 MB strings
@example(fields=[("comment", "x" * (1 << 20) + "\x00")], raw=b"c=" + b"\xff" * (1 << 20))
@example(fields=[("rating-0", "4\x00")], raw=b"")
@example(fields=[], raw=b"assignmentId=A1&rating-0=4%00")
@example(fields=[], raw=b"assignmentId=A1&rating-0=4\x1b")
@example(fields=[], raw=b"assignmentId=A1&rating-0=%FF")
@example(fields=[], raw=b"assignmentId=A1&rating-0=%ED%A0%80")
def test_a_posted_form_is_its_fields_or_a_400_with_a_message(fields: list[tuple[str, str]], raw: bytes) -> None:
    for body in (urllib.parse.urlencode(fields, encoding="utf-8", errors="surrogatepass").encode("ascii"), raw):
        try:
            got = form_fields(body)
        except WorkerError as exc:
            assert exc.status == 400 and exc.code == "InvalidInput" and "not recorded" in exc.message
            continue
        assert all(text_problem(n) is None and text_problem(v) is None for n, v in got)
        if body is not raw:
            assert got == fields  # a clean form reads back as posted


# -- over HTTP ------------------------------------------------------------------------------------------------
BAD_FORMS = [("rating=4%00", "U+0000"), ("rating=4%1B", "U+001B"), ("rating=4\x1b", "U+001B"),
             ("rating=%FF", "UTF-8"), ("rating=%ED%A0%80", "UTF-8")]


def test_both_origins_refuse_a_control_character_answer_alike_and_nothing_changes(market) -> None:
    """Issue 25: `4\\x00` was stored, and its answer XML stalled collect. Now 400, with the reason shown."""
    h = market.hit(max_assignments=1)
    market.workers.register("ACTRL1")
    aid = market.workers.accept("ACTRL1", h["HITId"])["AssignmentId"]
    token, csrf = market.workers._sessions["ACTRL1"]
    for raw, shown in BAD_FORMS:
        body = f"assignmentId={aid}&{raw}".encode("latin-1")
        status, payload, headers = _post(market.server.endpoint_url + "/mturk/externalSubmit", body,
                                         {"Content-Type": "application/x-www-form-urlencoded",
                                          "Cookie": f"mkt_session={token}", "X-CSRF-Token": csrf})
        assert status == 400 and payload["error"] == "InvalidInput" and shown in payload["message"], (raw, payload)
        status, page, headers = _post(market.server.content_url + "/mturk/externalSubmit", body,
                                      {"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 400 and headers["X-Error-Code"] == "InvalidInput" and shown in page["raw"], (raw, page)
        assert "not recorded" in page["raw"]  # the worker's frame shows why
    assert market.client.call("list_assignments_for_hit", HITId=h["HITId"])["NumResults"] == 0
    market.workers.submit(aid, [("score", "4")])  # still open: the clean answer goes through
    assert market.client.call("list_assignments_for_hit", HITId=h["HITId"])["NumResults"] == 1


def test_the_engine_refuses_what_the_doors_refuse(market) -> None:
    """The last line, for any caller that reaches the engine without a door (nothing is written)."""
    h = market.hit(max_assignments=1)
    market.workers.register("ACTRL2")
    aid = market.workers.accept("ACTRL2", h["HITId"])["AssignmentId"]
    with pytest.raises(WorkerError) as err:
        market.server.engine.worker("submit", aid, [("assignmentId", aid), ("rating-0", "4\x00")])
    assert err.value.status == 400 and "U+0000" in err.value.message
    assert market.client.call("list_assignments_for_hit", HITId=h["HITId"])["NumResults"] == 0


@pytest.mark.parametrize("body, problem", [(b'{"Name": "n", "Description": "d", "Title": "t\\ud800"}', "surrogate"),
                                           (b'{"Name": "n", "Description": "d", "Keywords": 1' + b"0" * 5000 + b"}", "JSON"),
                                           (b'{"Name": "n", "Description": "d", "Title": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                                            "deeper")])
def test_the_requester_api_answers_unreadable_json_with_a_400_not_a_service_fault(market, body: bytes, problem: str) -> None:
    url = market.server.endpoint_url + "/"
    creds = market.server.credentials
    headers = auth.sign_headers(url, body, {"Content-Type": "application/x-amz-json-1.1",
                                            "X-Amz-Target": TARGET + "CreateQualificationType"},
                                creds.access_key_id, creds.secret_access_key)
    status, payload, _ = _post(url, body, headers)
    assert status == 400 and "SerializationException" in payload["__type"] and problem in payload["Message"], payload


@pytest.mark.parametrize("path, body", [("/worker/api/accept", b'{"HITId": "\\ud800"}'),
                                        ("/worker/api/return", b'{"AssignmentId": "\\udc00x"}'),
                                        ("/worker/api/accept", b'{"HITId": 1' + b"0" * 5000 + b"}"),
                                        ("/worker/api/accept", DEEP_BODY)])
def test_the_worker_json_api_answers_unreadable_json_with_a_400(market, path: str, body: bytes) -> None:
    """A lone surrogate reached SQLite (UnicodeEncodeError) and a 5,000-digit number int() (ValueError): 500s."""
    market.workers.register("AJSON01")
    token, csrf = market.workers._sessions["AJSON01"]
    status, payload, _ = _post(market.server.endpoint_url + path, body, {"Content-Type": "application/json",
                                                                         "Cookie": f"mkt_session={token}", "X-CSRF-Token": csrf})
    assert status == 400 and payload["error"] == "MalformedRequest", payload
