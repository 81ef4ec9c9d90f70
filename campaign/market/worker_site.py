"""The worker side of the marketplace: pages for a person in a browser and the JSON API the simulated
crowd uses (both through the same engine calls, so a human and the simulation see one market), plus the
separate *content origin* that serves requesters' HIT HTML.

Who is who: a worker signs in with a code the operator issued (`campaign market worker add`); the
session lives in an HttpOnly SameSite cookie and every state-changing request carries the session's
CSRF token (a hidden form field, or the X-CSRF-Token header for the JSON API). Nothing a worker sends
names the worker: the session does.

Requester HTML is untrusted. It is served only from the content origin, with a `sandbox` CSP, and framed
by the worker pages with `sandbox="allow-scripts allow-forms"` (no `allow-same-origin`): its scripts run
in an opaque origin that can neither read the worker pages nor call the worker API with the worker's
cookie. On the worker origin a HIT's HTML is only ever sent as text/plain (for API clients).

HIT HTML is served with MTurk's hosted URLs (submit endpoint, externalHIT_v1.js, crowd-html-elements.js)
rewritten to root-relative paths, so its bytes do not depend on ports and content hashes are stable.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import http.cookies
import json
import secrets
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from campaign.market.accounts import Accounts, Session
from campaign.market.engine import Engine, WorkerError, dollars, question_parts
from campaign.market.protocol import LOOPBACK_HOSTS, ApiError, parse_json_object
from campaign.market.signin_limits import SignInLimiter
from campaign.market.worker_pages import WORKER_CSS, WORKER_JS, duration, inert, render
from campaign.money import fmt
from campaign.untrusted import Refused, read_form

REWRITES = (
    ("https://www.mturk.com/mturk/externalSubmit", "/mturk/externalSubmit"),
    ("https://workersandbox.mturk.com/mturk/externalSubmit", "/mturk/externalSubmit"),
    ("https://s3.amazonaws.com/mturk-public/externalHIT_v1.js", "/shims/externalHIT_v1.js"),
    ("https://assets.crowd.aws/crowd-html-elements.js", "/shims/crowd-html-elements.js"),
)
PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
COOKIE = "mkt_session"
FRAME_TTL = 2 * 3600  # seconds a frame link works; the worker page makes a new one each time it is shown
SUBMIT_TTL = 7 * 86400  # seconds an answer form's submit path works: MTurk's longest assignment duration
SUBMIT_PREFIX = "/s/"  # the content origin's answer target is /s/<worker>/<expiry>/<signature>/mturk/externalSubmit
MTURK_SUBMITS = ("https://www.mturk.com/mturk/externalSubmit", "https://workersandbox.mturk.com/mturk/externalSubmit")

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

SUBMITTED_SHIM = """// Tells the worker page (the frame's parent) that this assignment was submitted.
(function () {
  var aid = document.currentScript.getAttribute("data-assignment");
  if (window.parent !== window) { window.parent.postMessage({type: "campaign:submitted", assignmentId: aid}, "*"); }
})();
"""

SUBMITTED_PAGE = ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>Submitted</title></head><body>'
                  '<h1>HIT submitted</h1><p>Your answer was recorded. Thank you.</p>'
                  '<script src="/shims/submitted.js" data-assignment="{aid}"></script></body></html>')


@dataclass
class SiteConfig:
    """Origins as browsers see them, and the key that signs frame URLs for the content origin.

    A frame link is made for one worker (the one signed in on the worker site) and expires: its
    signature covers the HIT, the assignment, the worker and the expiry time, so a copied link neither
    lasts nor can be re-pointed at another worker."""

    worker_origin: str = "http://127.0.0.1"
    content_origin: str = "http://127.0.0.1:1"
    frame_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    frame_ttl: float = FRAME_TTL

    @property
    def secure(self) -> bool:
        return self.worker_origin.startswith("https://")

    def frame_sig(self, hit_id: str, assignment_id: str, worker_id: str, expires: int) -> str:
        msg = "|".join((hit_id, assignment_id, worker_id, str(expires))).encode()
        return hmac.new(self.frame_key, msg, hashlib.sha256).hexdigest()[:32]

    def submit_sig(self, assignment_id: str, worker_id: str, expires: int) -> str:
        msg = "|".join(("submit", assignment_id, worker_id, str(expires))).encode()
        return hmac.new(self.frame_key, msg, hashlib.sha256).hexdigest()[:32]

    def submit_to(self, assignment_id: str, worker_id: str) -> str:
        """The `turkSubmitTo` of an answer form served to `worker_id` for `assignment_id`: the content origin
        plus a signed path, so a post to `<turkSubmitTo>/mturk/externalSubmit` proves the form was served to
        the assignment's worker (an assignment id alone, seen or guessed, answers nothing there). A preview
        (no assignment) gets the bare origin: it has nothing to submit."""
        if not assignment_id or assignment_id == PREVIEW or not worker_id or "/" in worker_id:
            return self.content_origin
        expires = int(time.time() + SUBMIT_TTL)
        return (f"{self.content_origin}{SUBMIT_PREFIX}{urllib.parse.quote(worker_id, safe='')}/{expires}/"
                f"{self.submit_sig(assignment_id, worker_id, expires)}")

    def submit_worker(self, path: str, assignment_id: str) -> str | None:
        """The worker a content-origin answer path (`submit_to` + /mturk/externalSubmit) was made for, for
        this assignment; None when it is not such a path, was made for another assignment, or expired."""
        if not path.startswith(SUBMIT_PREFIX) or not path.endswith("/mturk/externalSubmit"):
            return None
        parts = path[len(SUBMIT_PREFIX):-len("/mturk/externalSubmit")].split("/")
        if len(parts) != 3 or not parts[1].isdigit() or len(parts[1]) > 12:
            return None
        wid, expires = urllib.parse.unquote(parts[0]), int(parts[1])
        if expires < time.time() or not hmac.compare_digest(self.submit_sig(assignment_id, wid, expires), parts[2]):
            return None
        return wid

    def frame_src(self, hit_id: str, assignment_id: str, worker_id: str) -> str:
        expires = int(time.time() + self.frame_ttl)
        q = urllib.parse.urlencode({"assignmentId": assignment_id, "hitId": hit_id,
                                    "turkSubmitTo": self.submit_to(assignment_id, worker_id),
                                    "workerId": worker_id, "exp": expires,
                                    "sig": self.frame_sig(hit_id, assignment_id, worker_id, expires)})
        return f"{self.content_origin}/hit?{q}"

    def frame_worker(self, q: dict[str, str]) -> str:
        """The worker a frame link was made for, if its signature holds and it has not expired."""
        hit_id, aid, wid, exp = (q.get(k, "") for k in ("hitId", "assignmentId", "workerId", "exp"))
        expires = int(exp) if exp.isdigit() and len(exp) < 12 else 0
        if not wid or not hmac.compare_digest(self.frame_sig(hit_id, aid or PREVIEW, wid, expires), q.get("sig", "")) \
                or expires < time.time():
            raise WorkerError("InvalidFrameLink", "This link has expired or was not made for you; open HITs from the worker site.", 403)
        return wid


@dataclass
class Reply:
    status: int
    content_type: str
    body: bytes
    headers: dict[str, str] | None = None


def _json(status: int, obj: Any, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, "application/json", json.dumps(obj).encode("utf-8"), {"Cache-Control": "no-store", **(headers or {})})


def _err(exc: WorkerError) -> Reply:
    return Reply(exc.status, "application/json", json.dumps({"error": exc.code, "message": exc.message}).encode(),
                 {"X-Error-Code": exc.code})


def _inert_source(text: str) -> Reply:
    """Requester HTML as data: text/plain, no sniffing, and a sandbox in case a browser renders it anyway."""
    return Reply(200, "text/plain; charset=utf-8", text.encode("utf-8"),
                 {"Content-Security-Policy": "sandbox; default-src 'none'", "Cache-Control": "no-store"})


def _redirect(location: str, headers: dict[str, str] | None = None) -> Reply:
    return Reply(303, "text/plain; charset=utf-8", b"", {"Location": location, **(headers or {})})


def rewrite(content: str) -> str:
    for old, new in REWRITES:
        content = content.replace(old, new)
    return content


def external_url_allowed(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return (parts.scheme == "https" and bool(parts.hostname)) or (parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS)


def frame_html(question: str, hit_id: str, assignment_id: str, worker_id: str, submit_to: str) -> str:
    """What the worker's frame shows: HTMLContent, or a page framing the ExternalURL with MTurk's parameters."""
    parts = question_parts(question)
    if parts["kind"] == "HTMLQuestion":
        content = parts.get("HTMLContent", "")
        path = urllib.parse.urlsplit(submit_to).path.rstrip("/")
        for url in MTURK_SUBMITS:  # a plain form's action keeps the signed path of its `submit_to`
            content = content.replace(url, path + "/mturk/externalSubmit")
        return rewrite(content)
    if parts["kind"] == "ExternalQuestion":
        url = external_src(parts, hit_id, assignment_id, worker_id, submit_to)
        height = parts.get("FrameHeight", "400").strip() or "400"
        return render_frame(url, height)
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>HIT</title></head><body>"
            "<p>This question format (QuestionForm) cannot be shown by this marketplace.</p></body></html>")


def external_src(parts: dict[str, str], hit_id: str, assignment_id: str, worker_id: str, submit_to: str) -> str:
    url = parts.get("ExternalURL", "").strip()
    if not external_url_allowed(url):
        return "about:blank"
    extra = urllib.parse.urlencode({"assignmentId": assignment_id, "hitId": hit_id, "turkSubmitTo": submit_to, "workerId": worker_id})
    return url + ("&" if "?" in url else "?") + extra


def render_frame(src: str, height: str) -> str:
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>HIT</title></head><body>"
            f'<iframe src="{html.escape(src)}" width="100%" height="{html.escape(height)}" frameborder="0"></iframe></body></html>')


def form_fields(body: bytes, refusal: str = "Your answer was not recorded") -> list[tuple[str, str]]:
    """A posted form's fields in order, or a 400 `WorkerError` whose message the worker sees: the body
    must be UTF-8 and no name or value may hold a control character, a lone surrogate or U+FFFE/U+FFFF
    (`campaign.untrusted`). Both origins read every form through this, so they refuse alike."""
    try:
        return read_form(body)
    except Refused as exc:
        raise WorkerError("InvalidInput", f"{refusal}: {exc}", 400) from None


def _form(body: bytes) -> dict[str, str]:
    return dict(form_fields(body, "This form was not accepted"))


def _body_json(body: bytes) -> dict[str, Any]:
    try:
        return parse_json_object(body)
    except ApiError as exc:
        message = str(exc.body.get("Message") or "The body must be a JSON object.")
        raise WorkerError("MalformedRequest", message, 400) from None


@runtime_checkable
class SiteExtension(Protocol):
    """Routes mounted on the worker origin under a path prefix (`WorkerSite.mount`): another way in for
    people the marketplace does not sign in itself (e.g. a recruiting service's participants). It answers
    every request under its prefix, and vouches for the assignments it served when the content origin
    frames them or receives their answer forms."""

    def route(self, method: str, path: str, query: dict[str, str], body: bytes) -> Reply | None: ...

    def serves(self, assignment_id: str) -> bool:
        """Whether the assignment was handed out through this extension (then its frames are its business)."""
        ...

    def check_frame(self, assignment_id: str) -> None:
        """Raise `WorkerError` unless the assignment's frame may be shown now."""
        ...

    def external_submit(self, assignment_id: str, fields: list[tuple[str, str]]) -> dict[str, Any] | None:
        """Record the answer form of an assignment it served (None: not one of its own)."""
        ...


class WorkerSite:
    """Routes of the worker origin. `signin_providers` is the hook for other ways in: path ->
    function(query, body) returning the worker id it vouches for, or None; `mount` adds whole route trees."""

    def __init__(self, engine: Engine, accounts: Accounts, config: SiteConfig) -> None:
        self.engine = engine
        self.accounts = accounts
        self.config = config
        self.signin_providers: dict[str, Callable[[dict[str, str], bytes], str | None]] = {}
        self._mounted: dict[str, SiteExtension] = {}
        self.limiter = SignInLimiter()

    def mount(self, prefix: str, extension: SiteExtension) -> None:
        """Serve every path under `prefix` (e.g. "/prolific/") with `extension`; one extension per prefix."""
        if not (prefix.startswith("/") and prefix.endswith("/")) or prefix in ("/", "/worker/", "/mturk/"):
            raise ValueError(f"cannot mount on {prefix!r}: a prefix is a path of its own, like '/name/'")
        if any(prefix.startswith(p) or p.startswith(prefix) for p in self._mounted):
            raise ValueError(f"the worker site already serves {prefix!r} or a path around it")
        self._mounted[prefix] = extension

    def unmount(self, prefix: str) -> None:
        self._mounted.pop(prefix, None)

    def mounted(self) -> dict[str, SiteExtension]:
        """Prefix -> the extension serving it."""
        return dict(self._mounted)

    def extension_serving(self, assignment_id: str) -> SiteExtension | None:
        """The mounted extension that handed out this assignment, if any."""
        return next((ext for ext in self._mounted.values() if ext.serves(assignment_id)), None)

    # -- sessions -------------------------------------------------------------------------------------
    def _session(self, headers: dict[str, str]) -> tuple[str, Session] | None:
        raw = next((v for k, v in headers.items() if k.lower() == "cookie"), "")
        try:
            jar = http.cookies.SimpleCookie(raw)
        except http.cookies.CookieError:
            return None
        token = jar[COOKIE].value if COOKIE in jar else ""
        s = self.accounts.session(token)
        return (token, s) if s else None

    def start_session(self, worker_id: str) -> tuple[Session, dict[str, str]]:
        """A new session for a worker someone vouched for; the headers set its cookie."""
        token, s = self.accounts.open_session(worker_id)
        attrs = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age=43200" + ("; Secure" if self.config.secure else "")
        return s, {"Set-Cookie": attrs}

    def _end_cookie(self) -> dict[str, str]:
        return {"Set-Cookie": f"{COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0" + ("; Secure" if self.config.secure else "")}

    def _same_origin(self, headers: dict[str, str]) -> bool:
        """A browser's POST names its origin; one from another site (or a sandboxed frame: "null") is refused."""
        origin = next((v for k, v in headers.items() if k.lower() == "origin"), None)
        return origin is None or origin == self.config.worker_origin

    def _redeem(self, code: str, peer: str) -> str | None:
        """The worker a sign-in code belongs to; None for a wrong one (counted against the address and the
        worker it names); TooManySignInAttempts once either has failed too often, the right code included."""
        code = code.strip()
        wait = self.limiter.blocked(peer, code)
        if wait > 0:
            raise WorkerError("TooManySignInAttempts", f"Too many wrong sign-in codes; try again in {int(wait) + 1} s.", 429)
        wid = self.accounts.redeem(code)
        if wid is None:
            self.limiter.failed(peer, code)
        return wid

    @staticmethod
    def _csrf_ok(s: Session, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(s.csrf, str(token))

    # -- headers --------------------------------------------------------------------------------------
    def _csp(self) -> str:
        frames = f"{self.config.content_origin} https: http://127.0.0.1:* http://localhost:*"
        return ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; "
                f"frame-src {frames}; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'")

    def _page(self, status: int, name: str, session: Session | None, headers: dict[str, str] | None = None, **ctx: Any) -> Reply:
        body = render(name, session=session, **ctx).encode("utf-8")
        return Reply(status, "text/html; charset=utf-8", body, {
            "Content-Security-Policy": self._csp(), "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin",
            "Cache-Control": "no-store", **(headers or {})})

    # -- routing --------------------------------------------------------------------------------------
    def route(self, method: str, path: str, query: dict[str, str], body: bytes, headers: dict[str, str],
              peer: str = "") -> Reply | None:
        """`peer`: the client's address (sign-in attempts are limited per address)."""
        for prefix, extension in self._mounted.items():
            if path.startswith(prefix):
                with_headers = getattr(extension, "route_with_headers", None)  # an extension that reads headers
                if with_headers is not None:
                    reply = with_headers(method, path, query, body, headers)
                    if reply is not None:
                        return reply
                return extension.route(method, path, query, body)
        found = self._session(headers)
        session = found[1] if found else None
        try:
            if path.startswith("/worker/api/") or (path == "/mturk/externalSubmit"):
                return self._api(method, path, query, body, headers, session, peer)
            return self._pages(method, path, query, body, headers, found, peer)
        except WorkerError as exc:
            if path.startswith("/worker/api/") or path == "/mturk/externalSubmit":
                return _err(exc)
            return self._page(exc.status, "error.html", session, {"X-Error-Code": exc.code}, code=exc.code, message=exc.message)

    def _need(self, session: Session | None) -> Session:
        if session is None:
            raise WorkerError("NotSignedIn", "Sign in first (with the link or code from the marketplace's operator).", 401)
        return session

    def _own(self, s: Session, aid: str) -> tuple[Any, Any]:
        """The worker's own open assignment; someone else's is AssignmentNotFound, like an unknown id."""
        return self.engine.worker("task", aid, s.worker_id)

    def _api(self, method: str, path: str, q: dict[str, str], body: bytes, headers: dict[str, str],
             session: Session | None, peer: str = "") -> Reply | None:
        e = self.engine
        if method == "POST" and path == "/worker/api/signin":
            wid = self._redeem(str(_body_json(body).get("Code", "")), peer)
            if wid is None:
                raise WorkerError("InvalidSignInCode", "This sign-in code is unknown or has expired.", 403)
            s, cookie = self.start_session(wid)
            return _json(200, {"WorkerId": wid, "CsrfToken": s.csrf}, cookie)
        if method == "POST" and path == "/worker/api/register":
            raise WorkerError("RegistrationClosed", "Workers are added by the marketplace's operator "
                              "(campaign market worker add); sign in with the code you were given.", 403)
        s = self._need(session)
        if method == "POST":
            csrf = next((v for k, v in headers.items() if k.lower() == "x-csrf-token"), None)
            if not self._same_origin(headers) or not self._csrf_ok(s, csrf):
                raise WorkerError("InvalidCsrfToken", "The request lacks this session's CSRF token.", 403)
        if method == "GET" and path == "/worker/api/hits":
            if q.get("workerId") and q["workerId"] != s.worker_id:
                raise WorkerError("NotYourSession", "You can only list HITs for yourself.", 403)
            try:
                limit = max(1, min(int(q.get("max", "100") or 100), 1000))
            except ValueError:
                raise WorkerError("InvalidParameter", "max must be a number.", 400) from None
            return _json(200, {"HITs": e.worker("available", s.worker_id, limit)})
        if method == "POST" and path == "/worker/api/accept":
            d = _body_json(body)
            if d.get("WorkerId") not in (None, "", s.worker_id):
                raise WorkerError("NotYourSession", "You can only accept HITs for yourself.", 403)
            return _json(200, e.worker("accept", s.worker_id, str(d.get("HITId", ""))))
        if method == "POST" and path == "/worker/api/request-qualification":
            d = _body_json(body)
            if d.get("WorkerId") not in (None, "", s.worker_id):
                raise WorkerError("NotYourSession", "You can only request qualifications for yourself.", 403)
            return _json(200, e.worker("request_qualification", s.worker_id, str(d.get("QualificationTypeId", ""))))
        if method == "POST" and path == "/worker/api/return":
            aid = str(_body_json(body).get("AssignmentId", ""))
            return _json(200, e.worker("return", aid, s.worker_id))
        if method == "GET" and path == "/worker/api/task":
            a, h = self._own(s, q.get("assignmentId", ""))
            return _inert_source(self._task(a, h))
        if method == "POST" and path == "/mturk/externalSubmit":
            fields = form_fields(body)
            aid = next((v for k, v in fields if k == "assignmentId"), "")
            if not aid:
                raise WorkerError("MissingAssignmentId", "The form did not include an assignmentId field.", 400)
            return _json(200, e.worker("submit", aid, fields, s.worker_id))
        return None

    def _task(self, a: Any, h: Any) -> str:
        return frame_html(h["question"], h["id"], a["id"], a["worker_id"], self.config.content_origin)

    def _hit_view(self, h: Any) -> dict[str, Any]:
        return {"id": h["id"], "title": inert(h["title"]), "description": inert(h["description"]),
                "requester": inert(h["requester"]), "reward": fmt(dollars(h["reward_cents"])), "allotted": duration(h["duration"])}

    def _pages(self, method: str, path: str, q: dict[str, str], body: bytes, headers: dict[str, str],
               found: tuple[str, Session] | None, peer: str = "") -> Reply | None:
        e = self.engine
        session = found[1] if found else None
        if method == "GET" and path == "/static/worker.js":
            return Reply(200, "application/javascript; charset=utf-8", WORKER_JS.encode(), {"Cache-Control": "no-cache"})
        if method == "GET" and path == "/static/worker.css":
            return Reply(200, "text/css; charset=utf-8", WORKER_CSS.encode(), {"Cache-Control": "no-cache"})
        if method == "GET" and path == "/worker/frame":
            # The HIT's source for API clients (the simulated crowd's preview); never rendered here.
            h = e.worker("preview", q.get("hitId", ""), session.worker_id if session else None)
            return _inert_source(frame_html(h["question"], h["id"], PREVIEW, "", self.config.content_origin))
        if method in ("GET", "HEAD") and path == "/":
            return _redirect("/worker") if session else self._page(200, "signin.html", None, code="", error="")
        if method == "GET" and path == "/signin":
            return self._page(200, "signin.html", session, code=q.get("code", ""), error="")
        if method == "POST" and path == "/signin":
            if not self._same_origin(headers):
                raise WorkerError("CrossSiteRequest", "Sign in from this site's own sign-in page.", 403)
            try:
                wid = self._redeem(_form(body).get("code", ""), peer)
            except WorkerError as exc:
                return self._page(exc.status, "signin.html", None, {"X-Error-Code": exc.code}, code="", error=exc.message)
            if wid is None:
                return self._page(403, "signin.html", None, code="", error="This sign-in code is unknown or has expired.")
            _, cookie = self.start_session(wid)
            return _redirect("/worker", cookie)
        provider = self.signin_providers.get(path)
        if provider is not None:
            wid = provider(q, body)
            if wid is None:
                raise WorkerError("SignInRefused", "This sign-in could not be verified.", 403)
            _, cookie = self.start_session(wid)
            return _redirect("/worker", cookie)
        if path in ("/worker", "/worker/") and method == "GET":
            if session is None:
                return _redirect("/")
            hits = [self._hit_view(e.worker("preview", x["HITId"], session.worker_id)) | {"available": x["NumberOfAssignmentsAvailable"]}
                    for x in e.worker("available", session.worker_id, 100)]
            return self._page(200, "list.html", session, hits=hits)
        if not path.startswith("/worker") and path != "/signout":
            return None
        if session is None:
            return _redirect("/") if method == "GET" else self._page(401, "error.html", None, code="NotSignedIn", message="Sign in first.")
        if method == "POST":
            form = _form(body)
            if not self._same_origin(headers) or not self._csrf_ok(session, form.get("csrf")):
                raise WorkerError("InvalidCsrfToken", "This form has expired; go back, reload the page and try again.", 403)
            if path == "/signout":
                assert found is not None
                self.accounts.close_session(found[0])
                return _redirect("/", self._end_cookie())
            if path == "/worker/accept":
                acc = e.worker("accept", session.worker_id, form.get("hitId", ""))
                return _redirect("/worker/work?" + urllib.parse.urlencode({"assignmentId": acc["AssignmentId"]}))
            if path == "/worker/return":
                e.worker("return", form.get("assignmentId", ""), session.worker_id)
                return _redirect("/worker")
            return None
        if path == "/worker/preview":
            h = e.worker("preview", q.get("hitId", ""), session.worker_id)
            view = self._hit_view(h)
            parts = question_parts(h["question"])
            src = (external_src(parts, h["id"], PREVIEW, session.worker_id, self.config.content_origin)
                   if parts["kind"] == "ExternalQuestion" else self.config.frame_src(h["id"], PREVIEW, session.worker_id))
            return self._page(200, "preview.html", session, h=view, src=src)
        if path == "/worker/work":
            a, h = self._own(session, q.get("assignmentId", ""))
            parts = question_parts(h["question"])
            src = (external_src(parts, h["id"], a["id"], session.worker_id, self.config.submit_to(a["id"], session.worker_id))
                   if parts["kind"] == "ExternalQuestion" else self.config.frame_src(h["id"], a["id"], session.worker_id))
            done = "/worker/done?" + urllib.parse.urlencode({"assignmentId": a["id"], "hitId": h["id"]})
            return self._page(200, "work.html", session, h=self._hit_view(h), src=src, aid=a["id"], done=done)
        if path == "/worker/done":
            return self._done(session, q.get("assignmentId", ""), q.get("hitId", ""))
        return None

    def _done(self, s: Session, aid: str, hit_id: str) -> Reply:
        try:
            self._own(s, aid)
            submitted = False  # still open: the frame's message was not a real submission
        except WorkerError as exc:
            submitted = exc.code == "AssignmentNotActive"  # no longer open (unknown ids are not "submitted")
        hit_type = None
        try:
            hit_type = self.engine.worker("preview", hit_id, s.worker_id)["hit_type_id"]
        except WorkerError:
            pass
        available = self.engine.worker("available", s.worker_id, 100)
        same = [x["HITId"] for x in available if x["HITTypeId"] == hit_type]
        next_hit = (same or [x["HITId"] for x in available] or [None])[0]
        return self._page(200, "done.html", s, submitted=submitted, next_hit=next_hit)


class ContentSite:
    """Routes of the content origin: requester HTML (frame URLs signed by the worker site), the shims,
    and the answer form's target. The target is `<turkSubmitTo>/mturk/externalSubmit` as on MTurk, where
    `turkSubmitTo` carries a path signed for the assignment and its worker (`SiteConfig.submit_to`): a post
    without it, or with one made for another assignment, is answered as an unknown assignment (404)."""

    def __init__(self, engine: Engine, config: SiteConfig, site: WorkerSite | None = None) -> None:
        self.engine = engine
        self.config = config
        self.site = site  # its Prolific door, when set, guards the frames and answers of HITs it served

    def _headers(self) -> dict[str, str]:
        return {"Content-Security-Policy": f"sandbox allow-scripts allow-forms; frame-ancestors {self.config.worker_origin}",
                "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}

    def route(self, method: str, path: str, q: dict[str, str], body: bytes) -> Reply | None:
        try:
            return self._route(method, path, q, body)
        except WorkerError as exc:
            page = f"<!DOCTYPE html><html><body><h1>{html.escape(exc.code)}</h1><p>{html.escape(exc.message)}</p></body></html>"
            return Reply(exc.status, "text/html; charset=utf-8", page.encode(), {**self._headers(), "X-Error-Code": exc.code})

    def _route(self, method: str, path: str, q: dict[str, str], body: bytes) -> Reply | None:
        js = "application/javascript; charset=utf-8"
        if path == "/shims/externalHIT_v1.js":
            return Reply(200, js, EXTERNAL_HIT_SHIM.encode())
        if path == "/shims/crowd-html-elements.js":
            return Reply(200, js, CROWD_ELEMENTS_SHIM.encode())
        if path == "/shims/submitted.js":
            return Reply(200, js, SUBMITTED_SHIM.encode())
        if method == "GET" and path == "/hit":
            hit_id, aid = q.get("hitId", ""), q.get("assignmentId", PREVIEW) or PREVIEW
            wid = self.config.frame_worker(q)
            extension = self.site.extension_serving(aid) if self.site is not None and aid != PREVIEW else None
            if extension is not None:
                extension.check_frame(aid)  # e.g. a Prolific participant's frame: valid while their submission may work
            elif self.site is not None and not self.site.accounts.has_session(wid):
                # the worker signed out, or was revoked, since the link was made
                raise WorkerError("InvalidFrameLink", "This link has expired or was not made for you; open HITs from the worker site.", 403)
            if aid == PREVIEW:
                h = self.engine.worker("preview", hit_id, wid)
            else:
                a, h = self.engine.worker("task", aid, wid)
                if a["hit_id"] != hit_id:
                    raise WorkerError("AssignmentNotFound", f"Assignment {aid} does not exist.", 404)
            page = frame_html(h["question"], hit_id, aid, wid, self.config.submit_to(aid, wid))
            return Reply(200, "text/html; charset=utf-8", page.encode("utf-8"), self._headers())
        if method == "POST" and path.endswith("/mturk/externalSubmit") and (
                path == "/mturk/externalSubmit" or path.startswith(SUBMIT_PREFIX)):
            fields = form_fields(body)
            aid = next((v for k, v in fields if k == "assignmentId"), "")
            if not aid:
                raise WorkerError("MissingAssignmentId", "The form did not include an assignmentId field.", 400)
            # Only a form served to the assignment's worker answers it: its path was signed for both, and the
            # worker still holds the assignment. Anything else is answered as an unknown assignment.
            holder = self.config.submit_worker(path, aid)
            if holder is None:
                raise WorkerError("AssignmentNotFound", f"Assignment {aid} does not exist.", 404)
            extension = self.site.extension_serving(aid) if self.site is not None else None
            if extension is None or extension.external_submit(aid, fields) is None:
                self.engine.worker("submit", aid, fields, holder)  # someone else's: AssignmentNotFound, as unknown
            page = SUBMITTED_PAGE.format(aid=html.escape(aid))
            return Reply(200, "text/html; charset=utf-8", page.encode("utf-8"), self._headers())
        return None
