"""Question XML: what CreateHIT accepts, and the parts the worker site shows."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from campaign.market.engine.base import check_ranges
from campaign.market.protocol import TurkError, range_problem

QUESTION_ROOTS = {"HTMLQuestion", "ExternalQuestion", "QuestionForm"}


def check_question(question: str) -> None:
    """The Question must be well-formed XML of a known root and at most 64 KiB, as MTurk requires."""
    if len(question.encode("utf-8")) > 65_535:
        check_ranges(range_problem("Question", "...", None, 65_535, length=True))
    try:
        root = ET.fromstring(question)
    except ET.ParseError as exc:
        raise TurkError("XMLParseError", f"There was an error parsing the XML question or answer data in your request: {exc}") from None
    local = root.tag.rsplit("}", 1)[-1]
    if local not in QUESTION_ROOTS:
        raise TurkError("XMLParseError", f"The Question root element {local} is not one of {', '.join(sorted(QUESTION_ROOTS))}.")


def question_parts(question: str) -> dict[str, str]:
    """HTMLContent / ExternalURL / FrameHeight of a stored question."""
    root = ET.fromstring(question)
    out: dict[str, str] = {"kind": root.tag.rsplit("}", 1)[-1]}
    for child in root:
        out[child.tag.rsplit("}", 1)[-1]] = child.text or ""
    return out

