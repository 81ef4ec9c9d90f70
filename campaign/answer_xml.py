"""QuestionFormAnswers XML, byte for byte as MTurk returns it for an HTML/External question.

Both sides use it: the marketplace builds it from a posted form, the campaign parses it back. Rules
(MTurk documents none for repeated names, so this is ours): one `Answer` per posted field in posting
order, a repeated field name gives repeated `Answer` elements, and the document is declared ASCII so
every non-ASCII character travels as a numeric character reference, as the real service sends it.

Neither side can fail in an unexpected way, because an answer nobody can read stops nothing but itself:
- the writer refuses (`UnwritableAnswer`) a name or value XML 1.0 cannot carry (C0 controls other than
  tab, LF and CR, lone surrogates, U+FFFE, U+FFFF: not even as character references). It refuses
  rather than escapes because any escape would be a private convention that changes the answer the
  worker gave, and the doors refuse such text first anyway (`campaign.untrusted`), with a message the
  worker sees; this is the last line. A carriage return is written as `&#13;`, since XML readers turn a
  literal one into a line feed: every answer the writer accepts reads back exactly.
- the reader gives the fields or `MalformedAnswer` (a `ValueError`) for any text or bytes at all: a
  document that does not parse, declares a DOCTYPE (entities are never part of an answer, and
  refusing them rules out entity expansion), or is not a QuestionFormAnswers.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

NAMESPACE = "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2005-10-01/QuestionFormAnswers.xsd"
RESERVED_FIELDS = frozenset({"assignmentId", "hitId", "turkSubmitTo", "workerId"})
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")  # not XML 1.0 Chars


class UnwritableAnswer(ValueError):
    """A field XML 1.0 cannot hold; the text names the field (when printable) and the character."""


class MalformedAnswer(ValueError):
    """A stored answer that is not a readable QuestionFormAnswers document."""


def _ascii(text: str) -> str:
    return escape(text, {"\r": "&#13;"}).encode("ascii", "xmlcharrefreplace").decode("ascii")


def _check(name: str, value: str) -> None:
    for what, text in (("a field name", name), (f"field {name!r}" if not _NOT_XML.search(name) else "a field", value)):
        m = _NOT_XML.search(text)
        if m is not None:
            raise UnwritableAnswer(f"{what[:60]} holds U+{ord(m.group()):04X}, which an answer cannot carry")


def build_answer_xml(fields: list[tuple[str, str]]) -> str:
    """Reserved frame parameters are dropped: MTurk never stores them as answers. `UnwritableAnswer`
    for a name or value XML cannot carry (nothing is written then)."""
    parts = ['<?xml version="1.0" encoding="ASCII"?>', f'<QuestionFormAnswers xmlns="{NAMESPACE}">']
    for name, value in fields:
        if name in RESERVED_FIELDS:
            continue
        _check(name, value)
        parts.append(f"<Answer><QuestionIdentifier>{_ascii(name)}</QuestionIdentifier>"
                     f"<FreeText>{_ascii(value)}</FreeText></Answer>")
    parts.append("</QuestionFormAnswers>")
    return "".join(parts)


def parse_answer_xml(xml: str | bytes) -> list[tuple[str, str]]:
    """(QuestionIdentifier, FreeText) pairs in document order; tolerant of a missing namespace.
    `MalformedAnswer` for anything else, whatever the input."""
    if not isinstance(xml, (str, bytes)):
        raise MalformedAnswer(f"an answer is text, not {type(xml).__name__}")
    data = xml.encode("ascii", "xmlcharrefreplace") if isinstance(xml, str) else xml
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise MalformedAnswer("the answer declares a DOCTYPE or entities, which answers never hold")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:  # a SyntaxError, not a ValueError: callers catch MalformedAnswer
        raise MalformedAnswer(f"the answer is not well-formed XML ({exc})") from None
    if _local(root.tag) != "QuestionFormAnswers":
        raise MalformedAnswer(f"the answer is a {_local(root.tag)[:40]!r} document, not QuestionFormAnswers")
    out: list[tuple[str, str]] = []
    for answer in root:
        if _local(answer.tag) != "Answer":
            continue
        name, value = "", ""
        for child in answer:
            tag = _local(child.tag)
            if tag == "QuestionIdentifier":
                name = child.text or ""
            elif tag in ("FreeText", "SelectionIdentifier"):
                value = child.text or ""
        out.append((name, value))
    return out


def _local(tag: object) -> str:
    """An element's name without its namespace (comments and processing instructions have none)."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""
