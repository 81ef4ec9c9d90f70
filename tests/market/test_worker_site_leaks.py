"""Issue 25, worker site: guarded HIT content needs a signed-in, qualified worker on both origins; someone
else's assignment looks exactly like an unknown one; frame links are bound to a worker and expire;
sign-in attempts are limited; a worker's sessions can be ended."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

from campaign.market.server import admin_main
from campaign.market.signin_limits import SignInLimiter, claimed_worker
from campaign.market.worker_client import WorkerAPIError

UNKNOWN = "3XUNKNOWNASSIGNMENT00000000000"


def _req(url: str, *, cookie: str | None = None, data: bytes | None = None, headers: dict[str, str] | None = None
         ) -> tuple[int, str, dict[str, str]]:
    h = dict(headers or {})
    if cookie:
        h["Cookie"] = f"mkt_session={cookie}"
    req = urllib.request.Request(url, data=data, headers=h, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode("utf-8", "replace"), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace"), dict(e.headers)


def _guarded_hit(market) -> tuple[str, str]:
    q = market.client.call("create_qualification_type", Name="Trusted", Description="trusted raters",
                           QualificationTypeStatus="Active")["QualificationType"]["QualificationTypeId"]
    h = market.hit(quals=[{"QualificationTypeId": q, "Comparator": "Exists", "ActionsGuarded": "DiscoverPreviewAndAccept"}])
    return h["HITId"], q


def test_guarded_hit_content_needs_a_signed_in_qualified_worker_on_both_origins(market):
    hit_id, qual = _guarded_hit(market)
    url = market.server.endpoint_url
    frame = f"{url}/worker/frame?" + urllib.parse.urlencode({"hitId": hit_id, "assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"})
    status, body, _ = _req(frame)
    assert status == 401 and "mturk_form" not in body
    market.workers.register("AOUTSIDER1")
    market.workers.register("AINSIDER1")
    market.client.call("associate_qualification_with_worker", QualificationTypeId=qual, WorkerId="AINSIDER1", IntegerValue=1)
    outsider, insider = market.workers._sessions["AOUTSIDER1"][0], market.workers._sessions["AINSIDER1"][0]
    assert _req(frame, cookie=outsider)[0] == 403
    status, body, _ = _req(frame, cookie=insider)
    assert status == 200 and "mturk_form" in body
    # the content origin: a link made for the unqualified worker shows nothing; one for the qualified worker does
    cfg = market.server.core.site.config
    status, body, _ = _req(cfg.frame_src(hit_id, "ASSIGNMENT_ID_NOT_AVAILABLE", "AOUTSIDER1"))
    assert status == 403 and "mturk_form" not in body
    status, body, _ = _req(cfg.frame_src(hit_id, "ASSIGNMENT_ID_NOT_AVAILABLE", "AINSIDER1"))
    assert status == 200 and "mturk_form" in body
    # an unguarded HIT is still open to anyone's preview, as on MTurk
    open_hit = market.hit()["HITId"]
    assert _req(f"{url}/worker/frame?" + urllib.parse.urlencode({"hitId": open_hit}))[0] == 200


def _refusal(status_body: tuple[int, str, dict[str, str]], aid: str) -> tuple[int, str]:
    status, body, _ = status_body
    return status, body.replace(aid, "<id>")


def test_someone_elses_assignment_looks_exactly_like_an_unknown_one(market):
    h = market.hit(max_assignments=3)
    theirs = market.work(h["HITId"], "AVICTIM1")  # submitted
    h2 = market.hit(max_assignments=3)
    market.workers.register("AVICTIM2")
    open_one = market.workers.accept("AVICTIM2", h2["HITId"])["AssignmentId"]  # still open
    market.workers.register("ASNOOP1")
    cookie, csrf = market.workers._sessions["ASNOOP1"]
    url = market.server.endpoint_url
    for aid in (theirs, open_one):
        probes = {
            "task": lambda a: _req(f"{url}/worker/api/task?assignmentId={a}", cookie=cookie),
            "return": lambda a: _req(f"{url}/worker/api/return", cookie=cookie, data=json.dumps({"AssignmentId": a}).encode(),
                                     headers={"X-CSRF-Token": csrf, "Content-Type": "application/json"}),
            "submit": lambda a: _req(f"{url}/mturk/externalSubmit", cookie=cookie,
                                     data=urllib.parse.urlencode({"assignmentId": a, "score": "1"}).encode(),
                                     headers={"X-CSRF-Token": csrf}),
            "work": lambda a: _req(f"{url}/worker/work?assignmentId={a}", cookie=cookie),
        }
        for name, probe in probes.items():
            got, unknown = _refusal(probe(aid), aid), _refusal(probe(UNKNOWN), UNKNOWN)
            assert got == unknown, name
            assert got[0] == 404, name
    # nothing the snoop tried changed the open assignment or answered it
    assert market.workers.task_html(open_one)
    assert market.client.call("get_assignment", AssignmentId=theirs)["Assignment"]["AssignmentStatus"] == "Submitted"


def test_done_page_for_someone_elses_assignment_does_not_say_submitted(market):
    h = market.hit(max_assignments=3)
    theirs = market.work(h["HITId"], "AVICTIM1")
    market.workers.register("ASNOOP1")
    cookie = market.workers._sessions["ASNOOP1"][0]
    url = market.server.endpoint_url
    _, page, _ = _req(f"{url}/worker/done?" + urllib.parse.urlencode({"assignmentId": theirs, "hitId": h["HITId"]}), cookie=cookie)
    assert "HIT submitted" not in page and "Not submitted yet" in page
    own = market.workers._sessions["AVICTIM1"][0]
    _, page, _ = _req(f"{url}/worker/done?" + urllib.parse.urlencode({"assignmentId": theirs, "hitId": h["HITId"]}), cookie=own)
    assert "HIT submitted" in page


def test_frame_links_are_bound_to_the_worker_and_expire(market):
    h = market.hit()
    market.workers.register("AFRAME1")
    market.workers.register("AFRAME2")
    aid = market.workers.accept("AFRAME1", h["HITId"])["AssignmentId"]
    cfg = market.server.core.site.config
    src = cfg.frame_src(h["HITId"], aid, "AFRAME1")
    assert _req(src)[0] == 200
    # re-pointed at another worker: the signature no longer holds
    moved = src.replace("workerId=AFRAME1", "workerId=AFRAME2")
    assert moved != src and _req(moved)[0] == 403
    # a link for the wrong worker, correctly signed, does not open someone else's assignment
    assert _req(cfg.frame_src(h["HITId"], aid, "AFRAME2"))[0] == 404
    # expired
    cfg.frame_ttl = -1
    try:
        assert _req(cfg.frame_src(h["HITId"], aid, "AFRAME1"))[0] == 403
    finally:
        cfg.frame_ttl = 7200
    # the worker's sessions ended: the link made before stops working
    market.server.operator.revoke_worker("AFRAME1")
    status, body, _ = _req(src)
    assert status == 403 and "mturk_form" not in body


def test_three_hundred_wrong_codes_then_the_right_one_is_refused(market):
    code = market.server.add_worker("ABRUTE1")
    url = market.server.endpoint_url + "/worker/api/signin"
    statuses = [_req(url, data=json.dumps({"Code": f"ABRUTE1-guess{i}"}).encode(),
                     headers={"Content-Type": "application/json"})[0] for i in range(300)]
    assert statuses[:10] == [403] * 10 and set(statuses[10:]) == {429}
    status, body, _ = _req(url, data=json.dumps({"Code": code}).encode(), headers={"Content-Type": "application/json"})
    assert status == 429 and "TooManySignInAttempts" in body
    # the sign-in form says the same
    status, body, _ = _req(market.server.endpoint_url + "/signin", data=urllib.parse.urlencode({"code": code}).encode())
    assert status == 429 and "Too many wrong sign-in codes" in body


def test_sign_in_is_limited_per_worker_across_addresses(market):
    site = market.server.core.site
    code = market.server.add_worker("ATARGET1")
    other = market.server.add_worker("ABYSTANDER1")

    def attempt(c: str, peer: str) -> int:
        reply = site.route("POST", "/worker/api/signin", {}, json.dumps({"Code": c}).encode(), {}, peer)
        assert reply is not None
        return reply.status

    assert [attempt(f"ATARGET1-guess{i}", f"10.0.{i}.1") for i in range(10)] == [403] * 10
    assert attempt(code, "10.9.9.9") == 429  # a fresh address, but the worker is locked
    assert attempt(other, "10.9.9.9") == 200  # another worker from that address is not


def test_the_limiter_forgets_after_its_window():
    now = [0.0]
    lim = SignInLimiter(limit=3, window=60, clock=lambda: now[0])
    for _ in range(3):
        lim.failed("1.2.3.4", "AW1-x")
    assert lim.blocked("1.2.3.4", "anything") > 0 and lim.blocked("5.6.7.8", "AW1-y") > 0
    assert lim.blocked("5.6.7.8", "AW2-y") == 0
    now[0] = 61.0
    assert lim.blocked("1.2.3.4", "AW1-x") == 0
    assert claimed_worker("AW1-abc") == "AW1" and claimed_worker("nope") is None and claimed_worker("aw1-x") is None


def test_revoke_ends_every_session_and_a_new_code_ends_the_old_ones(fresh_market, tmp_path, capsys):
    market = fresh_market  # `worker revoke` names the marketplace's folder
    market.workers.register("AREVOKE1")
    cookie = market.workers._sessions["AREVOKE1"][0]
    hits = market.server.endpoint_url + "/worker/api/hits"
    assert _req(hits, cookie=cookie)[0] == 200
    assert admin_main(["worker", "revoke", "AREVOKE1", "--state", str(tmp_path / "state")]) == 0
    assert "1 session(s) ended" in capsys.readouterr().out
    assert _req(hits, cookie=cookie)[0] == 401
    # a new code: the sessions opened with the old one end
    market.workers.register("AREVOKE1")
    second = market.workers._sessions["AREVOKE1"][0]
    assert _req(hits, cookie=second)[0] == 200
    market.server.add_worker("AREVOKE1")
    assert _req(hits, cookie=second)[0] == 401
    with pytest.raises(WorkerAPIError):
        market.workers.available("AREVOKE1")


def test_revoking_a_worker_the_marketplace_does_not_know_says_so(fresh_market, tmp_path, capsys):
    """Before: a mistyped id was answered '0 session(s) ended; sign-in code voided', exit 0, as if a worker
    had been revoked; the worker meant kept their sessions."""
    fresh_market.workers.register("AKNOWN1")
    assert admin_main(["worker", "revoke", "AKNOWM1", "--state", str(tmp_path / "state")]) == 2
    err = capsys.readouterr().err
    assert "no worker 'AKNOWM1' on the marketplace" in err and "nothing was revoked" in err
    assert admin_main(["worker", "revoke", "AKNOWN1", "--state", str(tmp_path / "state")]) == 0
    assert "1 session(s) ended" in capsys.readouterr().out
