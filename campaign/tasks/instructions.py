"""A stage's own instructions: Markdown from the spec, rendered into the HIT page as safe HTML.

The requester's Markdown is treated like any other untrusted text. markdown-it-py renders CommonMark
with raw HTML off, so `<script>`, `<img onerror=...>` or `<div>` in the source come out as visible text,
and a link is kept only if its target is http(s), mailto or relative (markdown-it's own check already
drops `javascript:`, `vbscript:`, `file:` and `data:`; the allow-list here also drops any other scheme a
browser might act on). The result is `Markup`, so the page's autoescape leaves the generated tags alone
and escapes everything else the template prints.
"""

from __future__ import annotations

import re
from functools import cache

from markdown_it import MarkdownIt
from markupsafe import Markup

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")
_ALLOWED_SCHEMES = frozenset({"http", "https", "mailto"})


def _safe_link(url: str) -> bool:
    """Whether a link target may be kept: no scheme (relative, #anchor) or an allowed one."""
    cleaned = re.sub(r"[\x00-\x20]", "", url)
    scheme = _SCHEME.match(cleaned)
    return scheme is None or scheme.group(1).lower() in _ALLOWED_SCHEMES


@cache
def _renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    base_validate = md.validateLink
    md.validateLink = lambda url: base_validate(url) and _safe_link(url)  # type: ignore[method-assign]
    return md


def instructions_html(markdown: str | None) -> Markup:
    """The instructions as HTML for the page, or empty Markup (the kind's built-in text is shown)."""
    if not markdown or not markdown.strip():
        return Markup("")
    return Markup(_renderer().render(markdown))
