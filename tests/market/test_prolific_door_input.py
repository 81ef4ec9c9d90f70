"""The Prolific door refuses what the worker site's doors refuse, before asking Prolific or changing
anything: a control character in an answer, fields that are not [name, value] string pairs, and JSON
it cannot read (100,000 levels deep gave a 500; issue 25)."""

from __future__ import annotations

import json

import pytest

from campaign.prolific.emulator.participant import add_participant
from tests.market.test_prolific_site import Site, _http, site  # noqa: F401 - `site` is the fixture

pytestmark = pytest.mark.prolific


def _submit_raw(site: Site, body: bytes) -> tuple[int, dict]:  # noqa: F811 - the fixture's name
    status, _, raw = _http(f"{site.market.endpoint_url}/prolific/api/submit", "POST", body)
    return status, json.loads(raw)


def test_a_control_character_answer_is_refused_with_a_message_and_the_task_stays_open(site: Site) -> None:  # noqa: F811
    alice = add_participant(site.em.root_url, site.em.token)
    sub, _ = alice.start(site.study_id)
    s = site.session(alice, sub)
    _, first = site.next(s)
    aid = first["AssignmentId"]
    for bad, code, shown in (("4\x00", "InvalidInput", "U+0000"), ("4\x1b", "InvalidInput", "U+001B"),
                             ("4\x85", "InvalidInput", "U+0085"), ("4\ud800", "MalformedRequest", "lone surrogate")):
        body = json.dumps({**s, "assignmentId": aid, "fields": [["score", bad]]}).encode()
        status, out = _submit_raw(site, body)
        assert status == 400 and out["error"] == code and shown in out["message"], out
    for fields in ([["score"]], [[1, 2]], [["score", "4", "5"]], "score=4", [["score", None]]):
        status, out = _submit_raw(site, json.dumps({**s, "assignmentId": aid, "fields": fields}).encode())
        assert status == 400 and out["error"] == "MalformedRequest", (fields, out)
    assert site.next(s)[1]["AssignmentId"] == aid  # nothing was recorded: the same task is still open
    status, nxt = site.submit(s, aid, "4")
    assert status == 200 and nxt["status"] == "task"


@pytest.mark.parametrize("body", [b'{"fields": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", b"[" * 100_000,
                                  b'{"PROLIFIC_PID": "\\ud800"}', b'{"n": 1' + b"0" * 5000 + b"}", b"\xff\xfe",
                                  b'{"n": NaN}'])
def test_unreadable_json_is_a_400_not_a_500(site: Site, body: bytes) -> None:  # noqa: F811
    status, out = _submit_raw(site, body)
    assert status == 400 and out["error"] == "MalformedRequest", out

