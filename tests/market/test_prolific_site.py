"""The task site's Prolific door: only a participant with their own ACTIVE submission sees or submits
work; a bundle is `bundle` different HITs, then the completion redirect."""

from __future__ import annotations

import html
import http.client
import json
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from campaign.clock import ManualClock
from campaign.market.accounts import write_credentials_file
from campaign.market.answers import parse_answer_xml
from campaign.market.client import make_client
from campaign.market.prolific_site import ProlificDoor
from campaign.market.server import RunningMarket, start_market
from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.participant import Participant, add_participant
from campaign.prolific.emulator.server import RunningEmulator, start_emulator
from campaign.prolific.gate import StudySeat
from campaign.tasks.base import answer_fields, html_question

pytestmark = pytest.mark.prolific

PAGE = ('<!DOCTYPE html><html><body><form id="mturk_form" method="post" action="https://www.mturk.com/mturk/externalSubmit">'
        '<input type="hidden" id="assignmentId" name="assignmentId" value=""><input name="score" value="3">'
        '<button type="submit">Submit</button></form></body></html>')


def _http(url: str, method: str = "GET", body: bytes | None = None, ctype: str = "application/json") -> tuple[int, dict[str, str], bytes]:
    """One request, redirects not followed (the tests look at them)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.netloc, timeout=30)
    try:
        conn.request(method, parts.path + ("?" + parts.query if parts.query else ""), body=body,
                     headers={"Content-Type": ctype} if body is not None else {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


@dataclass
class Site:
    market: RunningMarket
    em: RunningEmulator
    door: ProlificDoor
    study_id: str
    hit_ids: list[str]
    requester: Any

    def session(self, p: Participant, sub: str, pid: str | None = None) -> dict[str, str]:
        return {"PROLIFIC_PID": pid or p.id, "STUDY_ID": self.study_id, "SESSION_ID": sub}

    def next(self, session: dict[str, str]) -> tuple[int, dict[str, Any]]:
        status, _, raw = _http(f"{self.market.endpoint_url}/prolific/api/next?" + urllib.parse.urlencode(session))
        return status, json.loads(raw)

    def submit(self, session: dict[str, str], aid: str, score: str = "4") -> tuple[int, dict[str, Any]]:
        body = json.dumps({**session, "assignmentId": aid, "fields": [["score", score]]}).encode()
        status, _, raw = _http(f"{self.market.endpoint_url}/prolific/api/submit", "POST", body)
        return status, json.loads(raw)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    clock = ManualClock(1_800_000_000.0)
    em = start_emulator(tmp_path / "prolific", clock, fee_rate=Decimal("0.3"))
    market = start_market(tmp_path / "market", clock=clock)
    api = ProlificClient(em.base_url, em.token, max_retries=0)
    door = ProlificDoor(market.engine, market.core.site.config, tmp_path / "site", api, ttl=60)
    market.core.site.prolific = door
    try:
        creds = tmp_path / "credentials"
        write_credentials_file(creds, "default", market.credentials)
        req = make_client("local", market.endpoint_url, credentials_file=creds, max_rps=0, max_attempts=2)
        t = req.call("create_hit_type", Title="Rate", Description="Rate statements", Reward="0.00",
                     AssignmentDurationInSeconds=600, AutoApprovalDelayInSeconds=86400)["HITTypeId"]
        hits = [req.call("create_hit_with_hit_type", HITTypeId=t, MaxAssignments=3, LifetimeInSeconds=86400,
                         Question=html_question(PAGE))["HIT"]["HITId"] for _ in range(3)]
        sid = api.create_study({
            "name": "n", "description": "d", "external_study_url": f"{market.endpoint_url}/prolific/start?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
                                  "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}",
            "prolific_id_option": "url_parameters", "total_available_places": 5, "estimated_completion_time": 5,
            "reward": 100, "submissions_config": {"max_submissions_per_participant": -1},
            "completion_codes": [{"code": "DONE1", "code_type": "COMPLETED", "actions": [{"action": "MANUALLY_REVIEW"}]}]})["id"]
        api.transition_study(sid, "PUBLISH")
        door.add_seat(StudySeat(sid, t, 2, "DONE1"), "stage-1")
        yield Site(market, em, door, sid, hits, req)
    finally:
        market.stop()
        door.close()
        em.stop()


def test_a_bundle_of_different_hits_then_the_completion_redirect(site: Site) -> None:
    alice = add_participant(site.em.root_url, site.em.token)
    sub, _ = alice.start(site.study_id)
    s = site.session(alice, sub)
    status, first = site.next(s)
    assert status == 200 and first["status"] == "task"
    assert site.next(s)[1]["AssignmentId"] == first["AssignmentId"]  # the open one again, not a second slot
    _, second = site.submit(s, first["AssignmentId"])
    assert second["status"] == "task" and second["HITId"] != first["HITId"]
    _, end = site.submit(s, second["AssignmentId"])
    assert end["status"] == "done" and end["redirect"].endswith("?cc=DONE1")
    assert site.next(s)[1]["status"] == "done"  # no third HIT in a bundle of two
    assert alice.complete_from_redirect(sub, end["redirect"]) == "AWAITING REVIEW"
    assert site.door.assignments_of(sub) == [first["AssignmentId"], second["AssignmentId"]]
    ans = site.requester.call("get_assignment", AssignmentId=first["AssignmentId"])
    fields = parse_answer_xml(ans["Assignment"]["Answer"])
    assert ("prolific_submission_id", sub) in fields
    assert answer_fields(fields) == {"score": ["4"]}  # the kinds never see the door's field
    # A second submission in the same study: never a HIT this person already did.
    sub2, _ = alice.start(site.study_id)
    s2 = site.session(alice, sub2)
    _, third = site.next(s2)
    assert third["HITId"] not in (first["HITId"], second["HITId"])
    _, end2 = site.submit(s2, third["AssignmentId"])
    assert end2["status"] == "done"  # only one HIT left for them: the bundle ends short


def test_without_an_active_submission_of_their_own_nobody_sees_or_submits_work(site: Site) -> None:
    alice = add_participant(site.em.root_url, site.em.token)
    bob = add_participant(site.em.root_url, site.em.token)
    sub, _ = alice.start(site.study_id)
    _, task = site.next(site.session(alice, sub))
    aid = task["AssignmentId"]
    # Bob with Alice's session id: refused, for reading and for submitting.
    assert site.next(site.session(bob, sub))[0] == 403
    assert site.submit(site.session(bob, sub), aid)[0] == 403
    # Bob with no submission at all (a made-up session), or not an id.
    assert site.next(site.session(bob, "f" * 24))[0] == 403
    assert site.next({"PROLIFIC_PID": bob.id, "STUDY_ID": site.study_id, "SESSION_ID": ""})[0] == 403
    # Bob with his own active session still cannot submit Alice's task.
    bsub, _ = bob.start(site.study_id)
    status, out = site.submit(site.session(bob, bsub), aid)
    assert status == 403 and out["error"] == "NotYourAssignment"
    # Nor read its HIT through the door.
    status, _, _ = _http(f"{site.market.endpoint_url}/prolific/api/task?"
                         + urllib.parse.urlencode({**site.session(bob, bsub), "assignmentId": aid}))
    assert status == 403
    # A returned submission opens nothing any more (once the gate's memory of it has passed).
    bob.give_back(bsub)
    site.market.engine.clock.advance(120)  # type: ignore[attr-defined]
    assert site.next(site.session(bob, bsub))[0] == 403
    # The HTML pages refuse the same way.
    status, _, page = _http(f"{site.market.endpoint_url}/prolific/start?" + urllib.parse.urlencode(site.session(bob, sub)))
    assert status == 403 and b"someone else" in page
    # Alice's own work is untouched: her task is still hers to do.
    assert site.submit(site.session(alice, sub), aid)[0] == 200


def test_the_html_page_frames_the_hit_from_the_content_origin(site: Site) -> None:
    alice = add_participant(site.em.root_url, site.em.token)
    sub, url = alice.start(site.study_id)
    assert alice.id in url and sub in url
    base = site.market.endpoint_url
    assert url.startswith(base + "/prolific/start?")  # where Prolific sends the participant
    for n in (1, 2):
        status, headers, page = _http(url)
        assert status == 200 and f"Task {n} of 2".encode() in page
        assert "frame-src " + site.market.content_url in headers["Content-Security-Policy"]
        src = html.unescape(re.search(r'<iframe src="([^"]+)"', page.decode()).group(1))  # type: ignore[union-attr]
        assert src.startswith(site.market.content_url + "/hit?")
        frame = _http(src)
        assert frame[0] == 200 and b"<form" in frame[2]  # the requester HTML, on the content origin only
        aid = urllib.parse.parse_qs(urllib.parse.urlsplit(src).query)["assignmentId"][0]
        form = urllib.parse.urlencode({"assignmentId": aid, "score": "2"}).encode()
        status, _, _ = _http(site.market.content_url + "/mturk/externalSubmit", "POST", form, "application/x-www-form-urlencoded")
        assert status == 200
    status, headers, _ = _http(url)
    assert status == 303 and headers["Location"] == "https://app.prolific.com/submissions/complete?cc=DONE1"
    assert len(site.door.assignments_of(sub)) == 2
