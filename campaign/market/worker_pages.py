"""The worker site's pages (Jinja2, autoescaped) and its one script and stylesheet.

Every text a requester wrote (title, description, requester name) is shown through `inert` (bidi
controls removed) inside `<bdi>`, so a U+202E in a title cannot turn the rest of a row around. The pages carry no
inline script or style: the Content-Security-Policy forbids both, so injected markup could not run.
"""

from __future__ import annotations

import re

from jinja2 import DictLoader, Environment, select_autoescape

BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def inert(text: object) -> str:
    """Text with its bidirectional control characters removed (they only ever reorder what follows)."""
    return BIDI_CONTROLS.sub("", str(text if text is not None else ""))


def duration(seconds: object) -> str:
    s = int(str(seconds or 0))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    h, m = divmod(s // 60, 60)
    return f"{h} h {m} min" if m else f"{h} h"


WORKER_JS = """// The worker site's only script: when the HIT frame reports a submission, go to the "done" page.
(function () {
  var frame = document.getElementById("hit-frame");
  if (!frame) { return; }
  window.addEventListener("message", function (e) {
    if (e.source !== frame.contentWindow || !e.data || e.data.type !== "campaign:submitted") { return; }
    window.location.href = frame.getAttribute("data-done");
  });
})();
"""

WORKER_CSS = """
body { font-family: system-ui, sans-serif; margin: 0; color: #222; }
header { background: #233a5e; color: #fff; padding: .6rem 1.2rem; display: flex; align-items: center; gap: 1rem; }
header a { color: #fff; }
header .who { margin-left: auto; }
header form { display: inline; }
main { max-width: 64rem; margin: 1rem auto; padding: 0 1rem; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid #dde; vertical-align: top; }
td.num, th.num { text-align: right; }
.facts { display: flex; gap: 1.5rem; flex-wrap: wrap; color: #444; }
.actions { display: flex; gap: 1rem; margin: 1rem 0; align-items: center; }
iframe.hit { width: 100%; height: 70vh; border: 1px solid #ccd; }
.notice { background: #eef6ee; border-left: 4px solid #3a7d44; padding: .6rem 1rem; }
.error { background: #fbeeee; border-left: 4px solid #a33; padding: .6rem 1rem; }
button, .button { font-size: 1rem; padding: .4rem 1rem; }
"""

TEMPLATES = {
    "base.html": """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{% block title %}{% endblock %} - campaign marketplace</title><link rel="stylesheet" href="/static/worker.css"></head>
<body><header><strong>campaign marketplace</strong>{% if session %}<a href="/worker">HITs</a>
<span class="who">Signed in as <bdi>{{ session.worker_id }}</bdi></span>
<form method="post" action="/signout"><input type="hidden" name="csrf" value="{{ session.csrf }}"><button type="submit">Sign out</button></form>{% endif %}</header>
<main>{% block main %}{% endblock %}</main>{% block scripts %}{% endblock %}</body></html>""",
    "signin.html": """{% extends "base.html" %}{% block title %}Sign in{% endblock %}{% block main %}
<h1>Sign in</h1>
{% if error %}<p class="error">{{ error }}</p>{% endif %}
<p>Use the sign-in link or code you were given by the marketplace's operator.</p>
<form method="post" action="/signin"><label for="code">Sign-in code</label>
<input id="code" name="code" value="{{ code }}" size="40" autocomplete="off" required autofocus>
<button type="submit" id="signin">Sign in</button></form>{% endblock %}""",
    "list.html": """{% extends "base.html" %}{% block title %}HITs{% endblock %}{% block main %}
<h1>HITs available to you</h1>
{% if hits %}<table id="hits"><thead><tr><th>Title</th><th>Requester</th><th class="num">Reward</th><th>Time allotted</th>
<th class="num">Available</th><th></th></tr></thead><tbody>
{% for h in hits %}<tr><td><bdi>{{ h.title }}</bdi><br><small><bdi>{{ h.description }}</bdi></small></td><td><bdi>{{ h.requester }}</bdi></td>
<td class="num">${{ h.reward }}</td><td>{{ h.allotted }}</td><td class="num">{{ h.available }}</td>
<td><a class="view" href="/worker/preview?hitId={{ h.id | urlencode }}">View</a></td></tr>
{% endfor %}</tbody></table>{% else %}<p>No HITs are available to you right now. Come back later.</p>{% endif %}{% endblock %}""",
    "preview.html": """{% extends "base.html" %}{% block title %}{{ h.title }}{% endblock %}{% block main %}
<h1><bdi>{{ h.title }}</bdi></h1><p><bdi>{{ h.description }}</bdi></p>
<p class="facts"><span>Requester: <bdi>{{ h.requester }}</bdi></span><span>Reward: ${{ h.reward }}</span>
<span>Time allotted: {{ h.allotted }}</span></p>
<div class="actions"><form method="post" action="/worker/accept"><input type="hidden" name="csrf" value="{{ session.csrf }}">
<input type="hidden" name="hitId" value="{{ h.id }}"><button type="submit" id="accept">Accept</button></form>
<a href="/worker">Back to list</a></div>
<iframe class="hit" id="hit-frame" title="HIT preview" src="{{ src }}" sandbox="allow-scripts allow-forms" referrerpolicy="no-referrer"></iframe>{% endblock %}""",
    "work.html": """{% extends "base.html" %}{% block title %}{{ h.title }}{% endblock %}{% block main %}
<h1><bdi>{{ h.title }}</bdi></h1>
<p class="facts"><span>Requester: <bdi>{{ h.requester }}</bdi></span><span>Reward: ${{ h.reward }}</span>
<span>Time allotted: {{ h.allotted }}</span></p>
<div class="actions"><form method="post" action="/worker/return"><input type="hidden" name="csrf" value="{{ session.csrf }}">
<input type="hidden" name="assignmentId" value="{{ aid }}"><button type="submit" id="return">Return HIT</button></form>
<a href="/worker">Back to list</a></div>
<iframe class="hit" id="hit-frame" title="HIT" src="{{ src }}" data-done="{{ done }}" sandbox="allow-scripts allow-forms" referrerpolicy="no-referrer"></iframe>
{% endblock %}{% block scripts %}<script src="/static/worker.js"></script>{% endblock %}""",
    "done.html": """{% extends "base.html" %}{% block title %}Submitted{% endblock %}{% block main %}
{% if submitted %}<h1>HIT submitted</h1><p class="notice">Your answer was recorded. Thank you.</p>
{% else %}<h1>Not submitted yet</h1><p class="error">This HIT has not been submitted.</p>{% endif %}
<div class="actions">{% if next_hit %}<a class="button" id="next" href="/worker/preview?hitId={{ next_hit | urlencode }}">Next HIT</a>{% endif %}
<a class="button" id="back" href="/worker">Back to list</a></div>{% endblock %}""",
    "error.html": """{% extends "base.html" %}{% block title %}Error{% endblock %}{% block main %}
<h1>{{ code }}</h1><p class="error">{{ message }}</p><p><a href="{{ '/worker' if session else '/' }}">Back</a></p>{% endblock %}""",
}

ENV = Environment(loader=DictLoader(TEMPLATES), autoescape=select_autoescape(default=True, default_for_string=True))


def render(name: str, **context: object) -> str:
    return ENV.get_template(name).render(**context)
