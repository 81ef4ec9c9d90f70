"""Reading text, forms and JSON that come from outside: one rule set for every door.

Workers, Prolific participants, requesters and remote services send bytes; everything past the door
works on text that the store, the answer XML and every later step can hold. The rules, the same on the
worker site, the content origin, the Prolific door, the requester API and the Prolific emulator:

- bytes must be UTF-8 (strict: no invalid sequences, no encoded surrogates);
- JSON nests at most `MAX_JSON_DEPTH` levels (checked before the recursive parser runs, so a
  100,000-deep body is a 400, never a `RecursionError`), holds no lone surrogate (`"\\ud800"` is valid
  JSON but no UTF-8 store or XML document can hold it) and only finite numbers (`NaN`, `Infinity` and
  `1e999` are refused: they are not JSON numbers in RFC 8259, and a float that is not finite breaks
  every bound and sum after it);
- a form field (name or value) holds no control character other than tab, line feed and carriage
  return, no lone surrogate, and neither U+FFFE nor U+FFFF. XML 1.0 cannot carry C0 controls or those
  two even as character references, so an answer holding one could never be read back; DEL and the C1
  controls are allowed by XML but no person types them, and refusing the whole category keeps the
  rule short enough to state on the form's error page.

Everything refused raises `Refused` (a `ValueError`) whose text is fit to show the sender: it names
what was wrong and where, never echoes the offending text.
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from collections.abc import Iterable
from typing import Any

MAX_JSON_DEPTH = 64  # no request this project reads nests deeper than a handful of levels

# C0 controls but tab, LF and CR; DEL and the C1 controls; lone surrogates; the two XML-invalid noncharacters.
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
#: `_FORBIDDEN`'s part that XML 1.0, and so a HIT page, cannot carry (a researcher's text may hold DEL or
#: a C1 control and still post). The marketplace refuses a HIT whose page holds one (XMLParseError), so
#: inputs, spec strings and templates holding one are refused at `validate`: until 2026-11-30 such a
#: proposition passed, and its HIT then failed to post at every pass.
NOT_IN_A_PAGE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
#: What `inert` escapes for a terminal: C0, DEL and C1 controls.
_TERMINAL_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


class Refused(ValueError):
    """Input refused at the door; the text says what and where, for the person who sent it."""


def _describe(ch: str) -> str:
    code = ord(ch)
    if 0xD800 <= code <= 0xDFFF:
        return f"a lone surrogate (U+{code:04X})"
    if code in (0xFFFE, 0xFFFF):
        return f"a noncharacter (U+{code:04X})"
    return f"a control character (U+{code:04X})"




def inert(text: str | None, keep: str = "") -> str:
    """Stored or read text as a terminal may show it: each control character (C0, DEL, C1: an escape
    sequence from an answer, a label or an error could move the cursor or recolour the screen) written
    as its escape (`\\x1b`), but those in `keep` (a table cell keeps its line breaks), everything else
    as it is."""
    text = "" if text is None else str(text)
    return _TERMINAL_CONTROL.sub(lambda m: m.group() if m.group() in keep else m.group().encode("unicode_escape").decode("ascii"),
                                 text)


def for_rich(text: object) -> str:
    """Stored text (worker ids, reasons, event messages: some quote what people sent) for a Rich table or
    console line: control characters escaped (`inert`) and Rich's markup made literal."""
    from rich.markup import escape

    return escape(inert(str(text), keep="\n"))


def text_problem(text: str) -> str | None:
    """What makes `text` unfit for a form field (None: nothing): the first forbidden character."""
    m = _FORBIDDEN.search(text)
    return None if m is None else _describe(m.group())


def check_text(text: str, what: str) -> str:
    """`text` unchanged, or `Refused` naming `what` (e.g. "field 'rating-0'") and the character."""
    problem = text_problem(text)
    if problem is not None:
        raise Refused(f"{what} contains {problem}, which answers cannot hold; remove it and submit again.")
    return text


def field_label(name: str) -> str:
    """A field's name as an error message may show it: only when it is itself clean, and short."""
    if text_problem(name) is None and len(name) <= 40:
        return f"field {name!r}"
    return "a field name"


def check_fields(fields: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Form fields unchanged, or `Refused` for the first name or value holding a forbidden character."""
    out = list(fields)
    for name, value in out:
        check_text(name, "a field name")
        check_text(value, field_label(name))
    return out


def decode_utf8(raw: bytes, what: str = "the body") -> str:
    """Strict UTF-8 (Python's codec refuses invalid sequences and encoded surrogates), or `Refused`."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"{what} is not valid UTF-8 (byte {exc.start}).") from None


def read_form(raw: bytes) -> list[tuple[str, str]]:
    """An `application/x-www-form-urlencoded` body as (name, value) pairs in posting order, blank values
    kept; the body and every percent-decoded name and value must be UTF-8 and pass `check_fields`."""
    text = decode_utf8(raw, "the form")
    try:
        fields = urllib.parse.parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict",
                                        max_num_fields=None)
    except UnicodeDecodeError:
        raise Refused("the form holds a percent-encoded value that is not valid UTF-8.") from None
    except ValueError as exc:  # parse_qsl's own refusals (e.g. a bad separator)
        raise Refused(f"the form cannot be read: {exc}") from None
    return check_fields(fields)


def json_depth_ok(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether brackets outside strings nest at most `max_depth` deep (a linear scan, no recursion)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"{") + data.count(b"[") <= max_depth:  # cannot nest deeper than it has brackets
        return True
    depth = 0
    in_str = esc = False
    for b in data:
        if in_str:
            if esc:
                esc = False
            elif b == 0x5C:
                esc = True
            elif b == 0x22:
                in_str = False
        elif b == 0x22:
            in_str = True
        elif b in (0x5B, 0x7B):
            depth += 1
            if depth > max_depth:
                return False
        elif b in (0x5D, 0x7D):
            depth -= 1
    return True


def _no_constant(name: str) -> Any:
    raise Refused(f"the JSON holds {name}, which is not a JSON number.")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Refused(f"the JSON holds a number too large to read ({text[:20]}...).")
    return value


def _surrogate_in(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v):
                return True
        elif isinstance(v, dict):
            for k, x in v.items():
                if _SURROGATE.search(k):
                    return True
                stack.append(x)
        elif isinstance(v, list):
            stack.extend(v)
    return False


def loads_json(raw: bytes | str, what: str = "the body", max_depth: int = MAX_JSON_DEPTH) -> Any:
    """A JSON value under the rules above, or `Refused`. Never a `RecursionError`, a bare `ValueError`
    (Python refuses integers longer than 4,300 digits with one) or a value the store cannot hold."""
    text = decode_utf8(raw, what) if isinstance(raw, bytes) else raw
    if not json_depth_ok(text, max_depth):
        raise Refused(f"{what} nests deeper than {max_depth} levels.")
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except Refused:
        raise
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise Refused(f"{what} is not valid JSON ({type(exc).__name__}).") from None
    if _surrogate_in(value):
        raise Refused(f"{what} holds a lone surrogate (an unpaired \\ud800-\\udfff escape).")
    return value


def loads_json_object(raw: bytes | str, what: str = "the body") -> dict[str, Any]:
    """`loads_json` of a body that must be an object; an empty body is an empty object."""
    if not (raw.strip() if isinstance(raw, str) else raw.strip()):
        return {}
    value = loads_json(raw, what)
    if not isinstance(value, dict):
        raise Refused(f"{what} must be a JSON object.")
    return value
