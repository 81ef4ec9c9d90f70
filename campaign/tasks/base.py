"""What every task kind shares: HIT drafts, HTML templating with escaping, the HTMLQuestion wrapper.

Documents and worker answers are untrusted: every value put into a template goes through
`html.escape`, and a template never receives raw HTML from data. Task kinds differ only in how they
group items, what their form asks, and how an answer turns into judgments.
"""

from __future__ import annotations

import html
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TEMPLATE_DIR = Path(__file__).resolve().parent.parent.parent / "hit_templates"
HTML_QUESTION_NS = "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2011-11-11/HTMLQuestion.xsd"
RESERVED_FIELDS = frozenset({"assignmentId", "hitId", "turkSubmitTo", "workerId"})
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


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def render_template(name: str, template_dir: Path | None = None, **values: str) -> str:
    """Fill `hit_templates/<name>` ($placeholders). Callers pass already escaped fragments only."""
    text = ((template_dir or TEMPLATE_DIR) / name).read_text(encoding="utf-8")
    return string.Template(text).substitute(values)


def html_question(page: str, frame_height: int = 0) -> str:
    """Wrap a page in MTurk's HTMLQuestion XML; `]]>` would end the CDATA early, so it is split."""
    safe = page.replace("]]>", "]]]]><![CDATA[>")
    return (
        f'<HTMLQuestion xmlns="{HTML_QUESTION_NS}"><HTMLContent><![CDATA[{safe}]]></HTMLContent>'
        f"<FrameHeight>{int(frame_height)}</FrameHeight></HTMLQuestion>"
    )


def answer_fields(fields: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """Group posted fields by name (repeated names keep every value, in order); reserved ones dropped."""
    out: dict[str, list[str]] = {}
    for name, value in fields:
        if name in RESERVED_FIELDS:
            continue
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

    rows = []
    for key, values in values_by_item.items():
        if key.startswith(TRAP_PREFIX) or not values:
            continue
        n = len(values)
        mean = sum(values) / n
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
        rows.append({"item": key, "score": round(mean, 6), "n": n, "sd": round(sd, 6)})
    rows.sort(key=lambda r: (-r["score"], r["item"]))
    for rank, r in enumerate(rows, start=1):
        r["rank"] = rank
    return rows
