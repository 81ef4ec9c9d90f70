"""The worker side of the marketplace: the JSON API the simulated crowd uses and plain HTML pages for a
person in a browser. Both go through the same engine calls, so a human and the simulation see one market.

HIT HTML is served as MTurk's worker frame would serve it, with MTurk's hosted URLs (submit endpoint,
externalHIT_v1.js, crowd-html-elements.js) rewritten to root-relative paths on this server: the page then
works offline, and its bytes do not depend on the port, so content hashes are stable across runs.
"""

from __future__ import annotations

import html
import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

from campaign.market.engine import Engine, WorkerError, question_parts

REWRITES = (
    ("https://www.mturk.com/mturk/externalSubmit", "/mturk/externalSubmit"),
    ("https://workersandbox.mturk.com/mturk/externalSubmit", "/mturk/externalSubmit"),
    ("https://s3.amazonaws.com/mturk-public/externalHIT_v1.js", "/shims/externalHIT_v1.js"),
    ("https://assets.crowd.aws/crowd-html-elements.js", "/shims/crowd-html-elements.js"),
)
PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"

EXTERNAL_HIT_SHIM = """// Local stand-in for MTurk's externalHIT_v1.js: same entry point, same behaviour.
function turkGetParam(name, dflt) {
  var v = new URLSearchParams(window.location.search).get(name);
  return v === null ? dflt : v;
}
function turkSetAssignmentID(formId, buttonId) {
  var form = document.getElementById(formId || "mturk_form");
  var aid = turkGetParam("assignmentId", "ASSIGNMENT_ID_NOT_AVAILABLE");
  var field = document.getElementById("assignmentId");
  if (field) { field.value = aid; }
  var button = document.getElementById(buttonId || "submitButton");
  if (aid === "ASSIGNMENT_ID_NOT_AVAILABLE" && button) { button.disabled = true; button.value = "You must ACCEPT the HIT before you can submit the results."; }
  if (form) { form.action = decodeURIComponent(turkGetParam("turkSubmitTo", "")) + "/mturk/externalSubmit"; }
}
"""

CROWD_ELEMENTS_SHIM = """// Minimal local stand-in for crowd-html-elements.js: <crowd-form> posts its fields as one
// JSON answer named taskAnswers, as MTurk's element does.
(function () {
  function params() { return new URLSearchParams(window.location.search); }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("crowd-form").forEach(function (cf) {
      var form = document.createElement("form");
      form.method = "post";
      form.action = (params().get("turkSubmitTo") || "") + "/mturk/externalSubmit";
      while (cf.firstChild) { form.appendChild(cf.firstChild); }
      var button = document.createElement("button");
      button.type = "submit"; button.textContent = "Submit";
      form.appendChild(button);
      cf.appendChild(form);
      form.addEventListener("submit", function (e) {
        var data = {};
        new FormData(form).forEach(function (v, k) { data[k] = v; });
        form.querySelectorAll("input,textarea,select").forEach(function (el) { el.disabled = true; });
        var aid = document.createElement("input"); aid.type = "hidden"; aid.name = "assignmentId";
        aid.value = params().get("assignmentId") || "ASSIGNMENT_ID_NOT_AVAILABLE"; form.appendChild(aid);
        var ans = document.createElement("input"); ans.type = "hidden"; ans.name = "taskAnswers";
        ans.value = JSON.stringify([data]); form.appendChild(ans);
      });
    });
  });
})();
"""


@dataclass
class Reply:
    status: int
    content_type: str
    body: bytes
    headers: dict[str, str] | None = None


def _json(status: int, obj: Any) -> Reply:
    return Reply(status, "application/json", json.dumps(obj).encode("utf-8"))


def _html(status: int, text: str) -> Reply:
    return Reply(status, "text/html; charset=utf-8", text.encode("utf-8"))


def _err(exc: WorkerError) -> Reply:
    return _json(exc.status, {"error": exc.code, "message": exc.message})


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title></head>"
            f"<body>{body}</body></html>")


def rewrite(content: str) -> str:
    for old, new in REWRITES:
        content = content.replace(old, new)
    return content


def frame_html(question: str, hit_id: str, assignment_id: str, worker_id: str, submit_to: str) -> str:
    """What the worker's iframe shows: HTMLContent, or a page framing the ExternalURL with MTurk's parameters."""
    parts = question_parts(question)
    if parts["kind"] == "HTMLQuestion":
        return rewrite(parts.get("HTMLContent", ""))
    if parts["kind"] == "ExternalQuestion":
        url = parts.get("ExternalURL", "").strip()
        extra = urllib.parse.urlencode({"assignmentId": assignment_id, "hitId": hit_id, "turkSubmitTo": submit_to,
                                        "workerId": worker_id})
        src = url + ("&" if "?" in url else "?") + extra
        height = parts.get("FrameHeight", "400").strip() or "400"
        return _page("HIT", f'<iframe src="{html.escape(src)}" width="100%" height="{html.escape(height)}" frameborder="0"></iframe>')
    return _page("HIT", "<p>This question format (QuestionForm) cannot be shown by this marketplace.</p>")


class WorkerSite:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def route(self, method: str, path: str, query: dict[str, str], body: bytes, base_url: str) -> Reply | None:
        try:
            return self._route(method, path, query, body, base_url)
        except WorkerError as exc:
            if path.startswith("/worker/api/"):
                return _err(exc)
            reply = _html(exc.status, _page("Error", f"<h1>{html.escape(exc.code)}</h1><p>{html.escape(exc.message)}</p>"))
            reply.headers = {"X-Error-Code": exc.code}
            return reply

    def _route(self, method: str, path: str, q: dict[str, str], body: bytes, base: str) -> Reply | None:
        e = self.engine
        if path == "/shims/externalHIT_v1.js":
            return Reply(200, "application/javascript", EXTERNAL_HIT_SHIM.encode())
        if path == "/shims/crowd-html-elements.js":
            return Reply(200, "application/javascript", CROWD_ELEMENTS_SHIM.encode())
        if method == "POST" and path == "/worker/api/register":
            return _json(200, e.worker("register", _body_json(body)))
        if method == "GET" and path == "/worker/api/hits":
            limit = max(1, min(int(q.get("max", "100") or 100), 1000))
            return _json(200, {"HITs": e.worker("available", q.get("workerId", ""), limit)})
        if method == "POST" and path == "/worker/api/accept":
            d = _body_json(body)
            return _json(200, e.worker("accept", str(d.get("WorkerId", "")), str(d.get("HITId", ""))))
        if method == "POST" and path == "/worker/api/request-qualification":
            d = _body_json(body)
            return _json(200, e.worker("request_qualification", str(d.get("WorkerId", "")), str(d.get("QualificationTypeId", ""))))
        if method == "POST" and path == "/worker/api/return":
            return _json(200, e.worker("return", str(_body_json(body).get("AssignmentId", ""))))
        if method == "GET" and path == "/worker/api/task":
            a, h = e.worker("task", q.get("assignmentId", ""))
            return _html(200, self._task(a, h, base))
        if method == "GET" and path == "/worker/frame":
            return self._frame(q, base)
        if method == "POST" and path == "/mturk/externalSubmit":
            return self._submit(body)
        if method == "GET" and path in ("/worker", "/worker/"):
            return self._list_page(q.get("workerId", ""))
        if method == "GET" and path == "/worker/preview":
            return self._preview_page(q.get("hitId", ""), q.get("workerId", ""))
        if method == "POST" and path == "/worker/accept":
            form = dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace")))
            acc = e.worker("accept", form.get("workerId", ""), form.get("hitId", ""))
            loc = "/worker/work?" + urllib.parse.urlencode({"assignmentId": acc["AssignmentId"], "workerId": form.get("workerId", "")})
            return Reply(303, "text/html", b"", {"Location": loc})
        if method == "GET" and path == "/worker/work":
            a, h = e.worker("task", q.get("assignmentId", ""))
            src = "/worker/frame?" + urllib.parse.urlencode({"hitId": h["id"], "assignmentId": a["id"], "workerId": a["worker_id"], "turkSubmitTo": ""})
            return _html(200, _page(h["title"], f"<h1>{html.escape(h['title'])}</h1>"
                                    f'<iframe src="{html.escape(src)}" width="100%" height="800" sandbox="allow-scripts allow-forms allow-same-origin"></iframe>'))
        return None

    def _task(self, a, h, base: str) -> str:
        parts = question_parts(h["question"])
        if parts["kind"] == "HTMLQuestion":
            return rewrite(parts.get("HTMLContent", ""))
        return frame_html(h["question"], h["id"], a["id"], a["worker_id"], base)

    def _frame(self, q: dict[str, str], base: str) -> Reply:
        hit_id = q.get("hitId", "")
        aid = q.get("assignmentId", PREVIEW)
        wid = q.get("workerId", "")
        h = self.engine.worker("preview", hit_id, wid or None)
        return _html(200, frame_html(h["question"], hit_id, aid, wid, q.get("turkSubmitTo", base)))

    def _submit(self, body: bytes) -> Reply:
        fields = urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
        aid = next((v for k, v in fields if k == "assignmentId"), "")
        if not aid:
            raise WorkerError("MissingAssignmentId", "The form did not include an assignmentId field.", 400)
        self.engine.worker("submit", aid, fields)
        return _html(200, _page("Submitted", "<h1>HIT submitted</h1><p>Your answer was recorded. Thank you.</p>"))

    def _list_page(self, wid: str) -> Reply:
        hits = self.engine.worker("available", wid, 100)
        rows = "".join(
            f"<tr><td>{html.escape(h['Title'])}</td><td>{html.escape(h['Description'])}</td><td>${html.escape(h['Reward'])}</td>"
            f"<td>{h['NumberOfAssignmentsAvailable']}</td><td><a href=\"/worker/preview?"
            f"{html.escape(urllib.parse.urlencode({'hitId': h['HITId'], 'workerId': wid}))}\">preview</a></td></tr>" for h in hits)
        return _html(200, _page("HITs", f"<h1>HITs for {html.escape(wid)}</h1><table><tr><th>Title</th><th>Description</th>"
                                        f"<th>Reward</th><th>Available</th><th></th></tr>{rows}</table>"))

    def _preview_page(self, hit_id: str, wid: str) -> Reply:
        h = self.engine.worker("preview", hit_id, wid or None)
        src = "/worker/frame?" + urllib.parse.urlencode({"hitId": hit_id, "assignmentId": PREVIEW, "workerId": wid})
        form = (f'<form method="post" action="/worker/accept"><input type="hidden" name="hitId" value="{html.escape(hit_id)}">'
                f'<input type="hidden" name="workerId" value="{html.escape(wid)}"><button type="submit">Accept</button></form>')
        return _html(200, _page(h["title"], f"<h1>{html.escape(h['title'])}</h1><p>{html.escape(h['description'])}</p>{form}"
                                f'<iframe src="{html.escape(src)}" width="100%" height="800" sandbox="allow-scripts allow-forms"></iframe>'))


def _body_json(body: bytes) -> dict[str, Any]:
    try:
        d = json.loads(body.decode("utf-8") or "{}")
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise WorkerError("MalformedRequest", "The body is not JSON.", 400) from None
    if not isinstance(d, dict):
        raise WorkerError("MalformedRequest", "The body must be a JSON object.", 400)
    return d
