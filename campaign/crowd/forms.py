"""Reading a HIT's HTML the way a browser would, so simulated workers fill in the real form.

The crowd never sees item keys or the campaign's store: it reads the statements shown, looks up their
hidden truth by text (as a person judges what they read), and posts the form's own field names. So a
template change that breaks the form breaks the simulation too, as it would break real work.

`parse_form` reads a page as `html.parser.HTMLParser` does (`_FormParser`, kept as the reference), but
through a tokenizer of its own for the well-formed HTML the task kinds' templates render: HTMLParser
itself was 44% of the simulated crowd's CPU in a profile of a 47,000-proposition bench, and the fast path
reads a real page 4-6x faster. A page with anything the fast path does not know how `HTMLParser`
tokenizes (a bare `<`, a malformed tag, a processing instruction or CDATA section, odd quoting or
whitespace in a tag, a raw-text element inside a statement, ...) is read by `_FormParser` itself, so every
page gives exactly the `Form` it always did, garbage included.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from html import unescape
from html.parser import HTMLParser
from typing import Any

_SPACE = re.compile(r"\s+")


def norm_text(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


@dataclass
class Slot:
    """One shown item: its visible text and the input fields that belong to it."""

    index: int
    text: str = ""
    radio_name: str | None = None
    radio_values: list[str] = field(default_factory=list)
    attrs: dict[str, str] = field(default_factory=dict)


@dataclass
class Form:
    action: str = ""
    slots: list[Slot] = field(default_factory=list)
    hidden: dict[str, str] = field(default_factory=dict)
    text_inputs: list[str] = field(default_factory=list)
    radios: dict[str, list[str]] = field(default_factory=dict)
    data: dict[str, str] = field(default_factory=dict)  # data-* attributes of the form element


class _FormParser(HTMLParser):
    """The reference reading (and the fast path's fallback): what a page means is defined here; `_fast_parse`
    must give the same `Form` for every page it accepts (tests/crowd/test_forms.py compares the two)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.form = Form()
        self._slot: Slot | None = None
        self._in_statement = False
        self._slot_tag = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v or "") for k, v in attrs}
        if tag == "form":
            self.form.action = a.get("action", "")
            self.form.data = {k[5:]: v for k, v in a.items() if k.startswith("data-")}
        elif "data-slot" in a:
            self._slot = Slot(index=int(a["data-slot"]), attrs={k[5:]: v for k, v in a.items() if k.startswith("data-")})
            self._slot_tag = tag
            self.form.slots.append(self._slot)
        elif tag in ("p", "span", "div", "li") and {"statement", "tok"} & set(a.get("class", "").split()):
            self._in_statement = True
        elif tag == "input":
            kind = a.get("type", "text").lower()
            name = a.get("name", "")
            if not name:
                return
            if kind == "hidden":
                self.form.hidden[name] = a.get("value", "")
            elif kind == "radio":
                self.form.radios.setdefault(name, []).append(a.get("value", ""))
                if self._slot is not None:
                    self._slot.radio_name = name
                    self._slot.radio_values.append(a.get("value", ""))
            elif kind in ("text", "search"):
                self.form.text_inputs.append(name)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("p", "span", "div", "li") and self._in_statement:
            self._in_statement = False
            if self._slot is not None:
                self._slot.text += " "
        if self._slot is not None and tag == self._slot_tag:
            self._slot = None

    def handle_data(self, data: str) -> None:
        if self._in_statement and self._slot is not None:
            self._slot.text += data


def _reference_parse(html: str) -> Form:
    """The page read by `html.parser` itself: what `parse_form` gives for every page."""
    p = _FormParser()
    p.feed(html)
    p.close()
    for s in p.form.slots:
        s.text = _SPACE.sub(" ", s.text).strip()
    return p.form


# The fast path's grammar: a strict subset of HTML that `HTMLParser` splits into tags, names, values and
# text in only one way, kept clear of what later releases' stricter tokenizers read differently (checked
# against the running Python's HTMLParser by tests/crowd/test_forms.py). Whitespace in a tag is ASCII
# only; names are plain; an unquoted value has no quote, `=`, `<` or backtick and runs to whitespace or
# `>` (`<a href=b/>` is `b/`, not a self-closing tag, for HTMLParser as for browsers); comments hold no
# `--` and do not open with `>` or `->` (releases disagree there). Possessive quantifiers: a long
# malformed tag fails in linear time instead of backtracking.
_WS = "[ \t\n\r\f]"
_TAG_NAME = "[a-zA-Z][-a-zA-Z0-9]*+"
_ATTR_NAME = "[a-zA-Z_:][-a-zA-Z0-9_:.]*+"
_UNQUOTED = "[^\\s\"'=<>`]++"
_ATTR = f"""{_ATTR_NAME}(?:{_WS}*+={_WS}*+(?:"[^"]*+"|'[^']*+'|{_UNQUOTED}(?=[ \t\n\r\f>])))?"""
_COMMENT = "<!--(?!>|->)(?:[^-]++|-(?!-))*+-->"
_DOCTYPE = "<![dD][oO][cC][tT][yY][pP][eE][^<>]*+>"
# At each `<`: a start tag (name, attributes' text, then `/` if self-closing, or else the text up to an end
# tag right after it and that end tag's name, if there is one: a statement read in one match), an end
# tag, or a comment or doctype; a match of the bare `<` alone is something else, left to HTMLParser.
_TOKEN_SOURCE = (f"<(?:({_TAG_NAME})((?:{_WS}++{_ATTR})*+){_WS}*+(?:(/)>|>(?:([^<]*+)</({_TAG_NAME})>)?)"
                 f"|/({_TAG_NAME})>|({_COMMENT[1:]}|{_DOCTYPE[1:]}))?")
_TOKEN = re.compile(_TOKEN_SOURCE)
# One attribute of a start tag `_TOKEN` accepted: name, then the value as double-, single- or unquoted.
_ATTR_PARTS = re.compile(f"""({_ATTR_NAME})(?:{_WS}*={_WS}*(?:"([^"]*)"|'([^']*)'|({_UNQUOTED})))?""")
_DATA_SLOT = re.compile("data-slot", re.IGNORECASE)
# Elements whose content HTMLParser reads as raw text (script, style; later releases add more).
_RAW_TEXT = frozenset(HTMLParser.CDATA_CONTENT_ELEMENTS) | frozenset(getattr(HTMLParser, "RCDATA_CONTENT_ELEMENTS", ()))
_STATEMENT_TAGS = frozenset(("p", "span", "div", "li"))
# Start tags whose attributes can matter without a data-slot attribute (any tag with one matters).
_WATCHED = frozenset(("form", "input")) | _STATEMENT_TAGS


class _Unsure(Exception):
    """The page has something the fast path does not tokenize as HTMLParser does: read it the slow way."""


# What a start tag does to the form (`_start`'s first value).
_NOTHING, _FORM, _SLOT, _STATEMENT, _HIDDEN, _RADIO, _TEXT = range(7)


@lru_cache(maxsize=4096)
def _start(name: str, attr_text: str) -> tuple[str, int, Any, Any]:
    """What `_FormParser.handle_starttag` does with the start tag `<name attr_text>`: the tag's name
    (lowercased), what it does (`_NOTHING`, `_FORM`, ...) and its two values (a form's action and data-*
    attributes, a slot's index and data-* attributes, an input's name and value). Attributes are read as
    HTMLParser reads them: names lowercased, values unescaped, the last of repeated names kept.

    Cached: the same tags come back page after page (a nugget page's `<span class="tok" ... data-s="2"
    data-t="7">`, a Likert page's radio buttons); only the statements' text differs from page to page.
    The values are shared by every page with that tag, so the caller copies the dicts it keeps."""
    tag = name.lower()
    if tag not in _WATCHED and not (attr_text and _DATA_SLOT.search(attr_text)):
        return tag, _NOTHING, None, None
    a = {k.lower(): unescape(v) if (v := dq or sq or uq) else "" for k, dq, sq, uq in _ATTR_PARTS.findall(attr_text)}
    if tag == "form":
        return tag, _FORM, a.get("action", ""), {k[5:]: v for k, v in a.items() if k.startswith("data-")}
    if "data-slot" in a:
        return tag, _SLOT, int(a["data-slot"]), {k[5:]: v for k, v in a.items() if k.startswith("data-")}
    if tag in _STATEMENT_TAGS and {"statement", "tok"} & set(a.get("class", "").split()):
        return tag, _STATEMENT, None, None
    if tag == "input":
        kind = a.get("type", "text").lower()
        name = a.get("name", "")
        if name:
            if kind == "hidden":
                return tag, _HIDDEN, name, a.get("value", "")
            if kind == "radio":
                return tag, _RADIO, name, a.get("value", "")
            if kind in ("text", "search"):
                return tag, _TEXT, name, None
    return tag, _NOTHING, None, None


@lru_cache(maxsize=64)
def _skip(slot_tag: str) -> Callable[[str, int], re.Match[str] | None]:
    """`_TOKEN` at the first token from a position on that may matter while no statement's text is being
    read and `slot_tag` (if any) is the open slot's tag, or that is outside the grammar: what comes before
    it, `_FormParser` does nothing with (text, comments, the doctype, start tags other than form, input,
    statement tags, raw-text elements and `slot_tag` with no data-slot attribute, end tags other than
    statement tags' and `slot_tag`'s), and one regex match steps over it. Stopping early is always safe
    (the token loop reads what the run would have skipped), so names are matched case-insensitively as
    Unicode, which treats a few more names (`ſpan`) as ones that may matter. None: no token left."""
    tag = f"|{re.escape(slot_tag)}" if slot_tag else ""
    starts = "|".join(sorted(_WATCHED | _RAW_TEXT)) + tag
    ends = "|".join(sorted(_STATEMENT_TAGS)) + tag
    start = f"<(?!(?i:{starts})[\t\n\r\f />]){_TAG_NAME}(?:{_WS}++(?!(?i:data-slot)){_ATTR})*+{_WS}*+/?>"
    end = f"</(?!(?i:{ends})>){_TAG_NAME}>"
    return re.compile(f"(?:[^<]++|{start}|{end}|{_COMMENT}|{_DOCTYPE})*+{_TOKEN_SOURCE}").match


def _fast_parse(html: str) -> Form:
    """`_reference_parse` for pages in the strict grammar above; raises `_Unsure` for any other page.

    Only what `_FormParser` reacts to reaches Python code: runs of what it ignores are stepped over by
    one regex match (`_skip`), a start tag's attributes are decoded when the tag is a form, input or
    statement tag or carries data-slot, text only inside a statement of a slot; raw-text elements (the
    templates' style and script) are stepped over whole."""
    form = Form()
    slot: Slot | None = None
    slot_tag = ""
    texts: list[list[str]] = []  # per slot, the text pieces `_FormParser` would add to `Slot.text`
    parts: list[str] = []
    in_statement = False
    token = _TOKEN.search
    skip = _skip("")
    pos = 0
    while True:
        if in_statement and slot is not None:  # reading a statement's text: every token counts
            m = token(html, pos)
            if m is None:
                parts.append(unescape(html[pos:]))
                break
            if pos < m.start():
                parts.append(unescape(html[pos:m.start()]))
        else:
            m = skip(html, pos)
            if m is None:
                break
        pos = m.end()
        tag, attr_text, closed, text, end, end_tag, other = m.groups()
        if tag is not None:
            tag, does, one, two = _start(tag, attr_text)
            if does:
                if does == _STATEMENT:
                    in_statement = True
                elif does == _SLOT:
                    slot = Slot(index=one, attrs=dict(two))
                    slot_tag = tag
                    skip = _skip(tag)
                    form.slots.append(slot)
                    parts = []
                    texts.append(parts)
                elif does == _RADIO:
                    form.radios.setdefault(one, []).append(two)
                    if slot is not None:
                        slot.radio_name = one
                        slot.radio_values.append(two)
                elif does == _HIDDEN:
                    form.hidden[one] = two
                elif does == _TEXT:
                    form.text_inputs.append(one)
                else:
                    form.action, form.data = one, dict(two)
            if tag in _RAW_TEXT:
                # HTMLParser reads up to the closing tag as text; accepted only when the first `</` is
                # that closing tag (no `<!--`: later releases' script states), outside any statement
                pos = m.end() if text is None else m.start(4)
                close = html.find("</", pos)
                if (closed or (in_statement and slot is not None) or close < 0
                        or html[close + 2:close + 3 + len(tag)].lower() != tag + ">" or "<!--" in html[pos:close]):
                    raise _Unsure
                pos = close + 3 + len(tag)
                end = tag
            elif closed:
                end = tag  # `<x/>`: HTMLParser's handle_startendtag, a start tag then its end tag
            elif end is None:
                continue
            else:  # the text up to the end tag that follows
                if text and in_statement and slot is not None:
                    parts.append(unescape(text))
                end = end.lower()
        elif end_tag is not None:
            end = end_tag.lower()
        elif other is None:
            raise _Unsure  # a `<` that is no tag, comment or doctype of the grammar
        else:
            continue  # a comment or the doctype
        if in_statement and end in _STATEMENT_TAGS:
            in_statement = False
            if slot is not None:
                parts.append(" ")
        if slot is not None and end == slot_tag:
            slot = None
            skip = _skip("")
    for s, pieces in zip(form.slots, texts):
        s.text = _SPACE.sub(" ", "".join(pieces)).strip()
    return form


def parse_form(html: str) -> Form:
    """The page's form as `_FormParser` reads it; pages outside the fast path's grammar are read by it."""
    try:
        return _fast_parse(html)
    except _Unsure:
        return _reference_parse(html)
