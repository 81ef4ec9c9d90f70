"""What every task kind shares: HIT drafts, judgments, HTML templates, the HTMLQuestion wrapper.

Documents and worker answers are untrusted: HIT pages are Jinja2 templates with autoescape on, so every
value a template prints is escaped unless a kind deliberately passes `markupsafe.Markup`. Templates live
in the top-level `hit_templates` package and are read with `importlib.resources`, so an installed wheel
renders exactly what a checkout does.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from campaign.untrusted import Refused, check_text, field_label

TEMPLATE_PACKAGE = "hit_templates"
HTML_QUESTION_NS = "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2011-11-11/HTMLQuestion.xsd"
RESERVED_FIELDS = frozenset({"assignmentId", "hitId", "turkSubmitTo", "workerId",
                             "prolific_submission_id"})  # added by the task site's Prolific door
TRAP_PREFIX = "trap:"


class InvalidAnswer(ValueError):
    """A submitted answer that does not fit the HIT it answers (kept, never aggregated)."""


@dataclass(frozen=True)
class HitDraft:
    """A HIT as planned: deterministic from the spec and seed, before anything is posted."""

    hit_key: str
    stage: str
    item_keys: tuple[str, ...]
    batch: int = 0


@dataclass(frozen=True)
class ShownItem:
    key: str
    text: str

    @property
    def is_trap(self) -> bool:
        return self.key.startswith(TRAP_PREFIX)


@dataclass(frozen=True)
class Judgment:
    item_key: str
    value: float
    extra: Mapping[str, Any] = field(default_factory=dict)


def _mturk_entities(value: Any) -> Any:
    """Escape like `html.escape` (`&quot;`, `&#x27;`) rather than markupsafe (`&#34;`, `&#39;`).

    Applied to every printed value before autoescape (which then leaves the Markup alone): pages stay
    byte-identical to the ones earlier versions posted, which matters because a HIT's content seeds the
    simulated crowd and the demo's scores are compared byte for byte across versions.
    """
    if isinstance(value, Markup) or hasattr(value, "__html__"):
        return value
    return Markup(html.escape(str(value), quote=True))


def _environment(loader: jinja2.BaseLoader) -> jinja2.Environment:
    return jinja2.Environment(loader=loader, autoescape=True, finalize=_mturk_entities, keep_trailing_newline=True,
                              undefined=jinja2.StrictUndefined)


def _load_packaged(name: str) -> str:
    return (resources.files(TEMPLATE_PACKAGE) / name).read_text(encoding="utf-8")


@cache
def _packaged() -> jinja2.Environment:
    return _environment(jinja2.FunctionLoader(_load_packaged))


def render_template(name: str, **values: Any) -> str:
    """Render `hit_templates/<name>` with autoescape; values are data, never trusted HTML."""
    return _packaged().get_template(name).render(**values)


def render_source(source: str, **values: Any) -> str:
    """Render a template given as text (a kind that brings its own page), with the same escaping."""
    return _environment(jinja2.BaseLoader()).from_string(source).render(**values)


def render_page(builtin: str, template: str | None, instructions: str | None, **values: Any) -> str:
    """A kind's HIT page: its packaged template `builtin`, or the stage's own template file `template`
    (a path), given the same values and the same autoescape; `instructions` (the stage's Markdown) is
    rendered safely by `campaign.tasks.instructions` and printed where the built-in text would be.
    A stage's own file is read each time a page is rendered, so edit it before a campaign's first run."""
    from campaign.tasks.instructions import instructions_html

    values["instructions"] = instructions_html(instructions)
    if template:
        try:
            source = Path(template).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TemplateError(f"{template}: cannot read the stage's template: {exc}") from None
        try:
            return render_source(source, **values)
        except jinja2.TemplateError as exc:
            line = getattr(exc, "lineno", None) or _template_line(exc)
            raise TemplateError(f"{template}:{line}: {exc.message or exc}") from None
    return render_template(builtin, **values)


def _template_line(exc: BaseException) -> int:
    """The template line a render-time error came from: Jinja maps its traceback frames back to the
    template (file name "<template>" for a template given as text); 0 when none is found."""
    line, tb = 0, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class TemplateError(ValueError):
    """A stage's own template that cannot be read or rendered (named file:line)."""


def html_question(page: str, frame_height: int = 0) -> str:
    """Wrap a page in MTurk's HTMLQuestion XML; `]]>` would end the CDATA early, so it is split."""
    safe = page.replace("]]>", "]]]]><![CDATA[>")
    return (
        f'<HTMLQuestion xmlns="{HTML_QUESTION_NS}"><HTMLContent><![CDATA[{safe}]]></HTMLContent>'
        f"<FrameHeight>{int(frame_height)}</FrameHeight></HTMLQuestion>"
    )


def answer_fields(fields: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """Group posted fields by name (repeated names keep every value, in order); reserved ones dropped.

    Every kind's `parse` starts here, so this is where a kind's parsing is made total: a field that is
    not a (str, str) pair, or whose name or value holds a character the doors refuse (control
    characters, lone surrogates: `campaign.untrusted`), is an `InvalidAnswer`, the same rule the task
    site applies before storing, kept here for answers from elsewhere (a real marketplace, an old store)."""
    out: dict[str, list[str]] = {}
    for pair in fields:
        if not (isinstance(pair, tuple | list) and len(pair) == 2 and isinstance(pair[0], str) and isinstance(pair[1], str)):
            raise InvalidAnswer("a field is not a (name, value) pair of text")
        name, value = pair
        if name in RESERVED_FIELDS:
            continue
        try:
            check_text(name, "a field name")
            check_text(value, field_label(name))
        except Refused as exc:
            raise InvalidAnswer(str(exc)) from None
        out.setdefault(name, []).append(value)
    return out


def single(fields: dict[str, list[str]], name: str) -> str:
    values = fields.get(name)
    if not values:
        raise InvalidAnswer(f"missing field {name!r}")
    if len(values) > 1:
        raise InvalidAnswer(f"field {name!r} given {len(values)} times")
    return values[0]


def summarise(values_by_item: Mapping[str, Sequence[float]]) -> list[dict]:
    """Mean, count and sample standard deviation per item, ranked by mean (ties by key, so output is
    stable); trap items are never scored."""
    import math

    rows: list[dict[str, Any]] = []
    for key, values in values_by_item.items():
        if key.startswith(TRAP_PREFIX) or not values:
            continue
        values = sorted(values)  # the same sums whatever order the store returned them in (floats)
        n = len(values)
        mean = sum(values) / n
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
        rows.append({"item": key, "score": round(mean, 6), "n": n, "sd": round(sd, 6)})
    rows.sort(key=lambda r: (-r["score"], r["item"]))
    for rank, r in enumerate(rows, start=1):
        r["rank"] = rank
    return rows
