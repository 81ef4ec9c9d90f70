"""The content origin's `/mturk/externalSubmit` answers an assignment only through the submit path signed
for it and its worker (`SiteConfig.submit_to`, served as the frame's `turkSubmitTo` and in the form's
action): an assignment id alone, or a path made for another worker or assignment, gets the answer an
unknown assignment gets (404), and changes nothing."""

from __future__ import annotations

import html
import re
import urllib.error
import urllib.parse
import urllib.request


def _post(url: str, aid: str, score: str = "4") -> int:
    body = urllib.parse.urlencode({"assignmentId": aid, "score": score}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _submitted(market, hit_id: str) -> set[str]:
    out = market.client.call("list_assignments_for_hit", HITId=hit_id)["Assignments"]
    return {a["AssignmentId"] for a in out}


def test_only_the_form_served_to_the_holder_answers_its_assignment(market) -> None:
    h = market.hit(max_assignments=2)
    for w in ("AHOLDER1", "AFOREIGN1"):
        market.workers.register(w)
    held = market.workers.accept("AHOLDER1", h["HITId"])["AssignmentId"]
    mine = market.workers.accept("AFOREIGN1", h["HITId"])["AssignmentId"]
    config, content = market.server.core.site.config, market.server.content_url
    # someone else's assignment by its id: no answer, and the same 404 as an id nobody has
    assert _post(content + "/mturk/externalSubmit", held) == 404
    assert _post(content + "/mturk/externalSubmit", "A" * 30) == 404
    # the foreign worker's own signed path, pointed at the holder's assignment: also 404
    assert _post(config.submit_to(mine, "AFOREIGN1") + "/mturk/externalSubmit", held) == 404
    # a path signed for the holder's assignment but claiming the foreign worker cannot be made without the key
    forged = config.submit_to(held, "AHOLDER1").replace("/AHOLDER1/", "/AFOREIGN1/")
    assert _post(forged + "/mturk/externalSubmit", held) == 404
    assert _submitted(market, h["HITId"]) == set()
    # the holder's frame carries the signed path in the form's action; posting it records the answer
    frame = urllib.request.urlopen(config.frame_src(h["HITId"], held, "AHOLDER1"), timeout=10).read().decode()
    action = html.unescape(re.search(r'action="(/s/[^"]+/mturk/externalSubmit)"', frame).group(1))  # type: ignore[union-attr]
    assert _post(content + action, held) == 200
    assert _submitted(market, h["HITId"]) == {held}
    # a second post of the same form: the assignment is no longer open (409), and nothing changes
    assert _post(content + action, held) == 409
