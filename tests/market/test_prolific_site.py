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

from campaign.answer_xml import parse_answer_xml
from campaign.clock import ManualClock
from campaign.credentials import write_credentials_file
from campaign.market.prolific_site import ProlificDoor
from campaign.market.server import RunningMarket, start_market
from campaign.marketplaces.mturk_client import make_client
from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.participant import Participant, add_participant
from campaign.prolific.emulator.server import RunningEmulator, start_emulator
from campaign.prolific.gate import StudySeat, site_worker_id
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
    door = ProlificDoor(market.engine, market.core.site.config, tmp_path / "site", api)
    market.mount("/prolific/", door)
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
    # Only one HIT left for them: the bundle ends short, and the place is given back (no completion code,
    # which is a whole bundle's reward; the HIT done is paid per HIT as a bonus).
    assert end2["status"] == "return" and "redirect" not in end2
    assert site.door.assignments_of(sub2) == [third["AssignmentId"]]


def _market(site: Site) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Everything a refused request must leave alone: every assignment (status, answer) and HIT counter."""
    with site.market.engine.db.read() as c:
        a = [tuple(r) for r in c.execute("SELECT id, hit_id, worker_id, status, answer, submit_time FROM assignments ORDER BY seq")]
        h = [tuple(r) for r in c.execute("SELECT id, n_accepted, n_submitted, n_approved, n_rejected FROM hits ORDER BY id")]
    return a, h


def _routes(site: Site, session: dict[str, str], aid: str) -> list[tuple[str, int]]:
    """The door's four ways in with one session: (route, HTTP status)."""
    base = site.market.endpoint_url
    q = urllib.parse.urlencode(session)
    return [("/prolific/start", _http(f"{base}/prolific/start?{q}")[0]),
            ("/prolific/api/next", site.next(session)[0]),
            ("/prolific/api/task", _http(f"{base}/prolific/api/task?{q}&" + urllib.parse.urlencode({"assignmentId": aid}))[0]),
            ("/prolific/api/submit", site.submit(session, aid)[0])]


def test_without_an_active_submission_of_their_own_nobody_sees_or_submits_work(site: Site) -> None:
    """Issue 13's Done-when line, at the HTTP level of the door: every way in, every kind of bad session."""
    em = site.em
    alice, bob, carol, dave, erin = (add_participant(em.root_url, em.token) for _ in range(5))
    a_sub, _ = alice.start(site.study_id)
    _, a_task = site.next(site.session(alice, a_sub))
    a_aid = a_task["AssignmentId"]
    # Bob took a task, then returned his place on Prolific.
    b_sub, _ = bob.start(site.study_id)
    _, b_task = site.next(site.session(bob, b_sub))
    bob.give_back(b_sub)
    # Carol did her bundle and completed.
    c_sub, _ = carol.start(site.study_id)
    step = site.next(site.session(carol, c_sub))[1]
    while step["status"] == "task":
        step = site.submit(site.session(carol, c_sub), step["AssignmentId"])[1]
    carol.complete_from_redirect(c_sub, step["redirect"])
    # Dave is in a study this site does not serve.
    api = ProlificClient(em.base_url, em.token, max_retries=0)
    other = api.create_study({
        "name": "n2", "description": "d", "external_study_url": "https://elsewhere.example/?p={{%PROLIFIC_PID%}}",
        "prolific_id_option": "url_parameters", "total_available_places": 2, "estimated_completion_time": 5,
        "reward": 100, "completion_codes": [{"code": "X", "code_type": "COMPLETED", "actions": [{"action": "MANUALLY_REVIEW"}]}]})["id"]
    api.transition_study(other, "PUBLISH")
    d_sub, _ = dave.start(other)
    # Erin is admitted (her own active session) but names Alice's assignment.
    e_sub, _ = erin.start(site.study_id)

    cases = {
        "made-up session": ({"PROLIFIC_PID": bob.id, "STUDY_ID": site.study_id, "SESSION_ID": "f" * 24}, a_aid),
        "not an id": ({"PROLIFIC_PID": bob.id, "STUDY_ID": site.study_id, "SESSION_ID": "../x"}, a_aid),
        "no session": ({"PROLIFIC_PID": bob.id, "STUDY_ID": site.study_id, "SESSION_ID": ""}, a_aid),
        "returned": (site.session(bob, b_sub), b_task["AssignmentId"]),
        "completed": (site.session(carol, c_sub), a_aid),
        "another participant's id with a real session": (site.session(bob, a_sub), a_aid),
        "a study not served": ({"PROLIFIC_PID": dave.id, "STUDY_ID": other, "SESSION_ID": d_sub}, a_aid),
    }
    before = _market(site)
    for name, (session, aid) in cases.items():
        for route, status in _routes(site, session, aid):
            assert 400 <= status < 500, f"{name}: {route} answered {status}"
    # Erin, admitted with her own session, names Alice's assignment: neither its task nor its submit.
    e_session = site.session(erin, e_sub)
    status, _, _ = _http(site.market.endpoint_url + "/prolific/api/task?" + urllib.parse.urlencode({**e_session, "assignmentId": a_aid}))
    assert status == 403
    status, out = site.submit(e_session, a_aid)
    assert status == 403 and out["error"] == "NotYourAssignment"
    # Bob's returned place cannot submit his own task on the content origin either, nor open its frame.
    form = urllib.parse.urlencode({"assignmentId": b_task["AssignmentId"], "score": "1"}).encode()
    signed = site.market.core.site.config.submit_to(b_task["AssignmentId"], site_worker_id(bob.id))
    status, _, _ = _http(signed + "/mturk/externalSubmit", "POST", form, "application/x-www-form-urlencoded")
    assert status == 403
    frame = site.market.core.site.config.frame_src(b_task["HITId"], b_task["AssignmentId"], "AP" + bob.id.upper())
    assert _http(frame)[0] == 403
    assert _market(site) == before, "a refused request changed the marketplace"
    # The HTML page says why, escaped.
    status, _, page = _http(f"{site.market.endpoint_url}/prolific/start?" + urllib.parse.urlencode(site.session(bob, a_sub)))
    assert status == 403 and b"someone else" in page
    # Alice's own work is untouched: her task is still hers to do.
    assert site.submit(site.session(alice, a_sub), a_aid)[0] == 200
    assert _market(site) != before


def test_a_returned_place_cannot_submit_even_while_its_confirmation_is_remembered(site: Site) -> None:
    """The gate may remember a confirmation for reads; a submit asks Prolific every time."""
    site.door.gate.ttl = 600
    alice = add_participant(site.em.root_url, site.em.token)
    sub, _ = alice.start(site.study_id)
    s = site.session(alice, sub)
    _, task = site.next(s)
    alice.give_back(sub)  # no clock moves: the remembered confirmation is still young
    before = _market(site)
    status, out = site.submit(s, task["AssignmentId"])
    assert status == 403 and out["error"] == "NotAdmitted" and "returned" in out["message"]
    form = urllib.parse.urlencode({"assignmentId": task["AssignmentId"], "score": "1"}).encode()
    signed = site.market.core.site.config.submit_to(task["AssignmentId"], site_worker_id(alice.id))
    status, _, _ = _http(signed + "/mturk/externalSubmit", "POST", form, "application/x-www-form-urlencoded")
    assert status == 403
    assert site.next(s)[0] == 403  # the refusal dropped the remembered confirmation
    assert _market(site) == before


def test_a_timed_out_place_cannot_submit(site: Site) -> None:
    site.door.gate.ttl = 600
    alice = add_participant(site.em.root_url, site.em.token)
    sub, _ = alice.start(site.study_id)
    s = site.session(alice, sub)
    _, task = site.next(s)
    # The emulator times a place out once maximum_allowed_time has passed (tests/prolific/test_gate.py);
    # this study has none, so the time-out is written on Prolific's side directly.
    with site.em.store.transaction() as db:
        doc = db.get("submission", sub)
        assert doc is not None
        doc["status"] = "TIMED-OUT"
        db.put("submission", doc)
    before = _market(site)
    status, out = site.submit(s, task["AssignmentId"])
    assert status == 403 and "timed-out" in out["message"]
    assert _market(site) == before


def test_never_a_hit_sharing_an_item_with_one_already_given_in_the_stage(site: Site) -> None:
    items = {site.hit_ids[0]: frozenset({"x1", "x2"}), site.hit_ids[1]: frozenset({"x2", "x3"}),
             site.hit_ids[2]: frozenset({"x4"})}
    site.door.items_of = items.__getitem__
    given: dict[str, list[str]] = {}
    for _ in range(2):
        p = add_participant(site.em.root_url, site.em.token)
        for _round in range(2):
            sub, _ = p.start(site.study_id)
            s = site.session(p, sub)
            step = site.next(s)[1]
            while step["status"] == "task":
                given.setdefault(p.id, []).append(step["HITId"])
                step = site.submit(s, step["AssignmentId"])[1]
            assert step["status"] in ("done", "return")
    for pid, hits in given.items():
        assert len(hits) == len(set(hits)), "a HIT given twice"
        seen: set[str] = set()
        for h in hits:
            assert not items[h] & seen, f"{pid} was given item(s) {sorted(items[h] & seen)} twice"
            seen |= items[h]
        assert not {site.hit_ids[0], site.hit_ids[1]} <= set(hits)  # they share x2


def test_a_hit_whose_items_are_not_known_yet_is_not_served(site: Site) -> None:
    """Between posting a HIT and recording it the daemon's store cannot say what it shows: not served then."""
    known = {site.hit_ids[0]: frozenset({"x1"})}
    site.door.items_of = lambda hit_id: known.get(hit_id, frozenset())
    alice = add_participant(site.em.root_url, site.em.token)
    sub, _ = alice.start(site.study_id)
    s = site.session(alice, sub)
    _, first = site.next(s)
    assert first["HITId"] == site.hit_ids[0]
    _, end = site.submit(s, first["AssignmentId"])
    assert end["status"] == "wait"  # the two others are unknown: they may become servable
    known[site.hit_ids[1]] = frozenset({"x2"})  # recorded meanwhile: now it is served
    sub2, _ = alice.start(site.study_id)
    assert site.next(site.session(alice, sub2))[1]["HITId"] == site.hit_ids[1]


def test_store_items_of_reads_the_hits_items_without_traps(tmp_path: Path) -> None:
    from campaign.providers.prolific import store_items_of
    from campaign.store import HitRow, Store

    store = Store.open(tmp_path / "state")
    try:
        with store.session() as sess:
            sess.add(HitRow(campaign="c", stage="likert", hit_key="likert-0000", item_keys='["p1", "trap:0", "p2"]',
                            annotation="a", token="t", reward="0.00", assignments=1, hit_id="H1"))
        items_of = store_items_of(store)
        assert items_of("H1") == frozenset({"p1", "p2"}) and items_of("H2") == frozenset()
    finally:
        store.close()


def test_a_hit_answered_is_never_given_again_one_that_expired_unanswered_may_be(site: Site) -> None:
    known = {site.hit_ids[0]: frozenset({"x0"})}  # only the first HIT can be served at first
    site.door.items_of = lambda hit_id: known.get(hit_id, frozenset())
    alice = add_participant(site.em.root_url, site.em.token)
    sub, _ = alice.start(site.study_id)
    s = site.session(alice, sub)
    _, first = site.next(s)
    assert first["HITId"] == site.hit_ids[0]
    site.market.engine.clock.advance(601)  # type: ignore[attr-defined]  # past the assignment's 600 s: abandoned
    status, second = site.next(s)
    assert status == 200 and second["status"] == "task" and second["AssignmentId"] != first["AssignmentId"]
    assert second["HITId"] == first["HITId"]  # nothing was judged in it: it may come back
    known.update({site.hit_ids[1]: frozenset({"x1"}), site.hit_ids[2]: frozenset({"x2"})})
    _, third = site.submit(s, second["AssignmentId"])
    _, end = site.submit(s, third["AssignmentId"])
    assert third["HITId"] != first["HITId"] and end["status"] == "done"
    sub2, _ = alice.start(site.study_id)
    s2 = site.session(alice, sub2)
    _, fourth = site.next(s2)
    assert fourth["HITId"] not in (first["HITId"], third["HITId"])  # answered ones never again
    assert site.submit(s2, fourth["AssignmentId"])[1]["status"] == "return"  # a shorter bundle: the place goes back
    with site.market.engine.db.read() as c:
        done = c.execute("SELECT hit_id, COUNT(*) FROM assignments WHERE status='Submitted' GROUP BY hit_id").fetchall()
    assert sorted(n for _, n in done) == [1, 1, 1]


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
        # the assignment id alone answers nothing on the content origin: only the form's own signed action does
        status, _, _ = _http(site.market.content_url + "/mturk/externalSubmit", "POST", form, "application/x-www-form-urlencoded")
        assert status == 404
        action = re.search(r'action="(/s/[^"]+/mturk/externalSubmit)"', frame[2].decode()).group(1)  # type: ignore[union-attr]
        status, _, _ = _http(site.market.content_url + html.unescape(action), "POST", form, "application/x-www-form-urlencoded")
        assert status == 200
    status, headers, _ = _http(url)
    assert status == 303 and headers["Location"] == "https://app.prolific.com/submissions/complete?cc=DONE1"
    assert len(site.door.assignments_of(sub)) == 2
    for aid in site.door.assignments_of(sub):  # the form's answers carry the submission too, as the API's do
        ans = site.requester.call("get_assignment", AssignmentId=aid)
        assert ("prolific_submission_id", sub) in parse_answer_xml(ans["Assignment"]["Answer"])


def test_a_participant_the_door_cannot_serve_is_asked_to_return_the_place_at_once(site: Site) -> None:
    """Every free HIT shows an item this participant rated in the stage: no work will ever come for
    them, so holding the place (a `wait` until the study's maximum time) would only keep it from
    someone else; while a free HIT is merely not recorded yet, they are asked to wait."""
    known = {site.hit_ids[0]: frozenset({"x1"})}  # the others: not recorded yet
    site.door.items_of = lambda h: known.get(h, frozenset())
    bob = add_participant(site.em.root_url, site.em.token)
    sub, _ = bob.start(site.study_id)
    s = site.session(bob, sub)
    task = site.next(s)[1]
    assert task["HITId"] == site.hit_ids[0]
    known[site.hit_ids[1]] = frozenset({"x1", "x2"})
    assert site.submit(s, task["AssignmentId"])[1]["status"] == "wait"  # the third HIT may still be servable
    sub2, _ = bob.start(site.study_id)
    assert site.next(site.session(bob, sub2))[1]["status"] == "wait"  # the third HIT may still be servable
    known[site.hit_ids[2]] = frozenset({"x1", "x3"})
    assert site.next(site.session(bob, sub2))[1]["status"] == "return"


def _status(site: Site, aid: str) -> str:
    with site.market.engine.db.read() as c:
        return str(c.execute("SELECT status FROM assignments WHERE id=?", (aid,)).fetchone()[0])


def test_an_answer_the_task_cannot_read_is_refused_at_the_door_and_the_task_stays_open(site: Site) -> None:
    """Stored, an unreadable answer would take the HIT's slot for good and be rejected with the whole
    bundle; refused at the door, the participant can answer again (or return the task to others)."""
    from campaign.tasks.base import InvalidAnswer

    def check(hit_id: str, fields: list[tuple[str, str]]) -> None:
        assert hit_id in site.hit_ids
        if dict(fields).get("score") not in {"1", "2", "3", "4", "5"}:
            raise InvalidAnswer(f"score must be 1..5, got {dict(fields).get('score')!r}")

    site.door.check_answer = check
    alice = add_participant(site.em.root_url, site.em.token)
    sub, _ = alice.start(site.study_id)
    s = site.session(alice, sub)
    _, task = site.next(s)
    before = _market(site)
    for bad in ("", "9", "NaN"):
        status, out = site.submit(s, task["AssignmentId"], score=bad)
        assert status == 400 and out["error"] == "InvalidAnswer" and "1..5" in out["message"]
    # the content origin's form is checked alike
    form = urllib.parse.urlencode({"assignmentId": task["AssignmentId"], "score": "0"}).encode()
    signed = site.market.core.site.config.submit_to(task["AssignmentId"], site_worker_id(alice.id))
    assert _http(signed + "/mturk/externalSubmit", "POST", form, "application/x-www-form-urlencoded")[0] == 400
    assert _market(site) == before and _status(site, task["AssignmentId"]) == "Accepted"
    status, out = site.submit(s, task["AssignmentId"], score="2")
    assert status == 200 and out["status"] == "task"
    assert _status(site, task["AssignmentId"]) == "Submitted"


def test_a_left_place_gives_its_task_back_at_once_and_never_gets_it_again(site: Site) -> None:
    """A participant who returns the place (or times out) with a task open: the marketplace would keep the
    task Accepted until its deadline, and the same participant taking the study again would get the
    same task each time (in seed 2 of `campaign bench hostile`, one participant whose answers the door
    refused held a ranking stage's last slot 51 times over three simulated days)."""
    alice = add_participant(site.em.root_url, site.em.token)
    sub, _ = alice.start(site.study_id)
    _, task = site.next(site.session(alice, sub))
    alice.give_back(sub)
    assert _status(site, task["AssignmentId"]) == "Accepted"  # the marketplace does not know she left
    assert site.door.release(sub) == [task["AssignmentId"]]
    assert _status(site, task["AssignmentId"]) == "Returned"
    assert site.door.release(sub) == []  # once
    sub2, _ = alice.start(site.study_id)
    _, again = site.next(site.session(alice, sub2))
    assert again["status"] == "task" and again["HITId"] != task["HITId"]  # not the task she left with
    free = {h["HITId"]: h["NumberOfAssignmentsAvailable"]
            for h in site.market.engine.worker("available", site_worker_id(alice.id), 100)}
    assert free[task["HITId"]] == 3  # the slot she left is free for someone else now
