"""`campaign preview`: each stage's HIT with real items, as workers will see it, before anything is posted.

For every stage the first HIT the stage would post (one with a trap, when the stage has traps) is
planned the way the run plans it (`campaign.estimate.stage_groups`: the kind's own `plan`, or its
`plan_batch` for the first batch) and rendered by the kind's `page(...)`, byte for byte what the
marketplace would get. Around it comes a page like the built-in marketplace's worker frame: the HIT's
title, description, reward and time allotted, and the HIT in a sandboxed frame with the query string
the marketplace gives an accepted assignment (`assignmentId`, `turkSubmitTo`), so the form can be
filled in and submitted. The preview adds two things workers never see: a note listing the HIT's items
with the traps marked, and, instead of a marketplace, a panel that shows the answer the form would
send (a small script appended to the HIT page hands the submitted fields to the frame page; the
kind's own submit checks run first, and an answer they refuse is not shown).

Nothing here opens a store or calls a marketplace: `--out DIR` writes files, `--serve` serves that
folder on 127.0.0.1 until Ctrl-C.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from campaign import argtypes
from campaign.money import shown
from campaign.spec import Campaign, SpecError, Stage, load_spec
from campaign.tasks import get as get_kind
from campaign.tasks.base import ShownItem
from campaign.tasks.kind import PlanItem

PREVIEW_ASSIGNMENT = "PREVIEW_ASSIGNMENT"
#: where the form would go; the preview's script stops the submission before it leaves the page
PREVIEW_SUBMIT_TO = "https://preview.invalid"

#: appended to the HIT page (a preview-only addition): after the page's own submit handlers (registered
#: earlier, so they run first), an accepted submission is handed to the frame page instead of being sent
SUBMIT_SCRIPT = """<script>
/* campaign preview: show the answer instead of sending it */
(function () {
  var form = document.getElementById("mturk_form") || document.querySelector("form");
  if (!form) { return; }
  form.addEventListener("submit", function (e) {
    if (e.defaultPrevented) { return; }
    e.preventDefault();
    var fields = [];
    new FormData(form).forEach(function (value, name) { fields.push([name, String(value)]); });
    var answer = {type: "campaign:preview-answer", action: form.action, fields: fields};
    if (window.parent !== window) { window.parent.postMessage(answer, "*"); return; }
    document.body.textContent = "";
    var pre = document.createElement("pre"); pre.id = "answer"; pre.textContent = JSON.stringify(fields, null, 1);
    document.body.appendChild(pre);
  });
})();
</script>
"""

FRAME_SCRIPT = """<script>
/* campaign preview: the answer the HIT's form would send, shown as text */
(function () {
  var frame = document.getElementById("hit-frame");
  window.addEventListener("message", function (e) {
    if (e.source !== frame.contentWindow || !e.data || e.data.type !== "campaign:preview-answer") { return; }
    var box = document.getElementById("answer-box"); box.hidden = false;
    document.getElementById("answer-action").textContent = e.data.action;
    var body = document.getElementById("answer-fields"); body.textContent = "";
    e.data.fields.forEach(function (f) {
      var tr = document.createElement("tr");
      [f[0], f[1]].forEach(function (v) { var td = document.createElement("td"); td.textContent = v; tr.appendChild(td); });
      body.appendChild(tr);
    });
    document.getElementById("answer-json").textContent = JSON.stringify(e.data.fields);
    box.scrollIntoView();
  });
})();
</script>
"""

PREVIEW_CSS = """
.preview-note { background: #fff8e1; border-left: 4px solid #c90; padding: .6rem 1rem; margin: 1rem 0; }
.preview-note li.trap { font-weight: 600; }
#answer-box { background: #eef6ee; border-left: 4px solid #3a7d44; padding: .6rem 1rem; margin: 1rem 0; }
#answer-json { white-space: pre-wrap; word-break: break-all; font-size: .85rem; }
"""


class PreviewError(Exception):
    """A preview that cannot be made (unknown campaign or stage, unreadable items)."""


@dataclass(frozen=True)
class StagePreview:
    campaign: str
    stage: str
    kind: str
    page: Path  # the frame page to open
    hit: Path  # the kind's HIT page (with the preview's submit script)
    items: tuple[ShownItem, ...]
    hits_planned: int


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def _texts(campaign: Campaign, items: Sequence[PlanItem]) -> dict[str, str]:
    from campaign.estimate import trap_keys
    from campaign.prolific.checks import attention_text

    out = {it.key: it.text for it in items}
    for stage in campaign.stages:
        for key, text in zip(trap_keys(stage), stage.traps.texts):
            # on Prolific a trap shows its attention check's instruction, as the run stores it (`load_items`)
            out[key] = attention_text(stage.kind, text) if campaign.prolific is not None else text
    return out


def _chosen(groups: Sequence[tuple[str, ...]]) -> tuple[str, ...]:
    """The HIT to show: the first with a trap (so its marking can be seen), else the first."""
    from campaign.tasks.base import TRAP_PREFIX

    return next((g for g in groups if any(k.startswith(TRAP_PREFIX) for k in g)), groups[0])


FRAME_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Preview: {{ title }} - {{ campaign }} / {{ stage }}</title>
<style>{{ css }}</style></head>
<body><header><strong>campaign preview</strong><span class="who">{{ campaign }} / stage {{ stage }} ({{ kind }})</span></header>
<main>
<h1><bdi>{{ title }}</bdi></h1><p><bdi>{{ description }}</bdi></p>
<p class="facts"><span>{{ pay }}</span><span>Time allotted: {{ allotted }}</span>
<span>Assignments per HIT: {{ assignments }}</span><span>HITs planned in this stage: {{ hits }}</span></p>
<div class="preview-note" id="preview-note"><strong>Preview only</strong> (workers do not see this box): this HIT's
{{ items|length }} items in the order shown{% if traps %}, {{ traps }} of them a trap{% endif %}.
<ol id="preview-items">{% for it in items %}<li class="{{ 'trap' if it.is_trap else 'item' }}" data-key="{{ it.key }}">
{%- if it.is_trap %}TRAP: {% endif %}{{ it.text }} <small>({{ it.key }})</small></li>{% endfor %}</ol></div>
<iframe class="hit" id="hit-frame" title="HIT" src="{{ src }}" sandbox="allow-scripts allow-forms" referrerpolicy="no-referrer"></iframe>
<div id="answer-box" hidden><h2 id="submitted">The answer that would be sent</h2>
<p>to <code id="answer-action"></code>, with these fields:</p>
<table><thead><tr><th>field</th><th>value</th></tr></thead><tbody id="answer-fields"></tbody></table>
<p id="answer-json"></p></div>
</main>{{ script }}</body></html>
"""

INDEX_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>campaign preview</title></head>
<body><h1>campaign preview</h1><ul id="stages">{% for p in previews %}
<li><a href="{{ p.page.name }}">{{ p.campaign }} / {{ p.stage }}</a> ({{ p.kind }}, {{ p.hits_planned }} HITs)</li>{% endfor %}
</ul></body></html>
"""


def _render(template: str, **values: object) -> str:
    """Render with autoescape: every spec and item text is data (the fixed CSS and script are Markup)."""
    from jinja2 import Environment

    return Environment(autoescape=True).from_string(template).render(**values)


def frame_page(campaign: Campaign, stage: Stage, shown_items: Sequence[ShownItem], hit_file: str, hits: int) -> str:
    """The worker-frame page around the HIT; texts pass `inert` (no bidi controls) as on the worker site."""
    from urllib.parse import urlencode

    from markupsafe import Markup

    from campaign.market.worker_pages import WORKER_CSS, duration, inert

    if campaign.prolific is None:
        pay = f"Reward: {shown(stage.reward, campaign.currency)}"
    else:  # a Prolific participant is paid per submission (a bundle of HITs), not per HIT
        from campaign.prolific.study import reward_per_submission

        pay = (f"Paid per Prolific submission of {campaign.prolific.bundle} HITs: "
               f"{shown(reward_per_submission(campaign.prolific), campaign.currency)}")
    query = urlencode({"assignmentId": PREVIEW_ASSIGNMENT, "hitId": "PREVIEW", "turkSubmitTo": PREVIEW_SUBMIT_TO})
    items = [ShownItem(key=it.key, text=inert(it.text)) for it in shown_items]
    return _render(FRAME_TEMPLATE, title=inert(stage.title), description=inert(stage.description), campaign=campaign.name,
                   stage=stage.name, kind=stage.kind, css=Markup(WORKER_CSS + PREVIEW_CSS), pay=pay,
                   allotted=duration(stage.duration), assignments=stage.assignments, hits=hits, items=items,
                   traps=sum(1 for it in items if it.is_trap), src=f"{hit_file}?{query}", script=Markup(FRAME_SCRIPT))


def with_submit_script(page: str) -> str:
    """The kind's page with the preview's submit script before `</body>` (or at the end)."""
    at = page.rfind("</body>")
    return page[:at] + SUBMIT_SCRIPT + page[at:] if at >= 0 else page + SUBMIT_SCRIPT


def preview_stage(campaign: Campaign, stage: Stage, items: Sequence[PlanItem], out: Path, seed: int = 0) -> StagePreview:
    from campaign.estimate import stage_groups

    groups, _ = stage_groups(campaign, stage, items, seed)
    if not groups:
        raise PreviewError(f"campaign {campaign.name}: stage {stage.name} plans no HIT from these items")
    texts = _texts(campaign, items)
    shown_items = tuple(ShownItem(key=k, text=texts[k]) for k in _chosen(groups))
    base = f"{_slug(campaign.name)}--{_slug(stage.name)}"
    hit = out / f"{base}.hit.html"
    page = out / f"{base}.html"
    hit.write_text(with_submit_script(get_kind(stage.kind).page(stage, shown_items, campaign.topic)), encoding="utf-8")
    page.write_text(frame_page(campaign, stage, shown_items, hit.name, len(groups)), encoding="utf-8")
    return StagePreview(campaign.name, stage.name, stage.kind, page, hit, shown_items, len(groups))


def write_previews(campaigns: Sequence[Campaign], out: Path, stage_name: str | None = None, seed: int = 0) -> list[StagePreview]:
    """One frame page (and its HIT page) per stage, and an index linking them."""
    from campaign.estimate import plan_items

    out.mkdir(parents=True, exist_ok=True)
    done: list[StagePreview] = []
    for c in campaigns:
        stages = [s for s in c.stages if stage_name is None or s.name == stage_name]
        if not stages:
            continue
        items = plan_items(c)
        done.extend(preview_stage(c, s, items, out, seed) for s in stages)
    if stage_name is not None and not done:
        raise PreviewError(f"no stage named {stage_name!r} in the chosen campaigns")
    (out / "index.html").write_text(_render(INDEX_TEMPLATE, previews=done), encoding="utf-8")
    return done


def serve(out: Path, port: int = 0) -> None:
    """Serve `out` on 127.0.0.1 until Ctrl-C: static files only, on loopback, for one person's browser."""
    import functools
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), functools.partial(Quiet, directory=str(out)))
    print(f"preview served at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("preview", help="write each stage's HIT with real items as workers will see it; posts nothing")
    p.add_argument("--config", default="campaigns.yaml", help="the spec file")
    p.add_argument("--campaign", action="append", default=[], metavar="NAME", help="preview only this campaign (repeatable)")
    p.add_argument("--stage", default=None, metavar="S", help="preview only the stage named S")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write the pages to (created if missing)")
    p.add_argument("--serve", action="store_true", help="then serve DIR on 127.0.0.1 until Ctrl-C")
    p.add_argument("--port", type=argtypes.port, default=0, help="port for --serve (0: any free port)")
    p.add_argument("--seed", type=argtypes.seed, default=0, help="seed of the plan, as `run --seed`")
    p.set_defaults(func=cmd_preview)


def cmd_preview(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(args.config)
    except SpecError as exc:
        for line in exc.problems:
            print(line, file=sys.stderr)
        return 2
    chosen = [c for c in spec.campaigns if not args.campaign or c.name in args.campaign]
    unknown = sorted(set(args.campaign) - {c.name for c in spec.campaigns})
    if unknown:
        print(f"campaign preview: no campaign named {', '.join(unknown)} in {args.config}", file=sys.stderr)
        return 2
    out = Path(args.out)
    try:
        done = write_previews(chosen, out, args.stage, args.seed)
    except PreviewError as exc:
        print(f"campaign preview: {exc}", file=sys.stderr)
        return 2
    for p in done:
        traps = sum(1 for it in p.items if it.is_trap)
        print(f"{p.campaign} / {p.stage} ({p.kind}): {p.page}  ({len(p.items)} items, {traps} traps; "
              f"{p.hits_planned} HITs planned)")
    print(f"index: {out / 'index.html'}")
    if args.serve:
        serve(out, args.port)
    return 0
