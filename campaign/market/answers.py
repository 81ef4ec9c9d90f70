"""QuestionFormAnswers XML, byte for byte as MTurk returns it for an HTML/External question.

Both sides use it: the marketplace builds it from a posted form, the campaign parses it back. Rules
(MTurk documents none for repeated names, so this is ours): one `Answer` per posted field in posting
order, a repeated field name gives repeated `Answer` elements, and the document is declared ASCII so
every non-ASCII character travels as a numeric character reference, as the real service sends it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

NAMESPACE = "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2005-10-01/QuestionFormAnswers.xsd"
RESERVED_FIELDS = frozenset({"assignmentId", "hitId", "turkSubmitTo", "workerId"})


def _ascii(text: str) -> str:
    return escape(text).encode("ascii", "xmlcharrefreplace").decode("ascii")


def build_answer_xml(fields: list[tuple[str, str]]) -> str:
    """Reserved frame parameters are dropped: MTurk never stores them as answers."""
    parts = ['<?xml version="1.0" encoding="ASCII"?>', f'<QuestionFormAnswers xmlns="{NAMESPACE}">']
    for name, value in fields:
        if name in RESERVED_FIELDS:
            continue
        parts.append(f"<Answer><QuestionIdentifier>{_ascii(name)}</QuestionIdentifier>"
                     f"<FreeText>{_ascii(value)}</FreeText></Answer>")
    parts.append("</QuestionFormAnswers>")
    return "".join(parts)


def parse_answer_xml(xml: str) -> list[tuple[str, str]]:
    """(QuestionIdentifier, FreeText) pairs in document order; tolerant of a missing namespace."""
    root = ET.fromstring(xml.encode("ascii", "xmlcharrefreplace") if isinstance(xml, str) else xml)
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


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]
