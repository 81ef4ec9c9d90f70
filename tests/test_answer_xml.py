"""The answer XML writer never emits what its reader cannot read, and the reader is total.

Writer: every field it accepts reads back exactly (names, values, order, repeated names; a carriage
return included); a field XML 1.0 cannot carry is refused (`UnwritableAnswer`), never written.
Reader: any text or bytes give fields or `MalformedAnswer` (a ValueError), never `ParseError` (a
SyntaxError, which collect's `except ValueError` missed: issue 25's stalled campaign).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from campaign.answer_xml import (
    RESERVED_FIELDS,
    MalformedAnswer,
    UnwritableAnswer,
    build_answer_xml,
    parse_answer_xml,
)

XML_INVALID = st.sampled_from(["\x00", "\x01", "\x08", "\x0b", "\x0c", "\x1b", "\x1f", "\ud800", "\udfff", "\ufffe", "\uffff"])
CHARS = st.one_of(st.characters(exclude_categories=()), XML_INVALID, st.sampled_from(["\r", "\n", "\t", "<", "&", ">", "]"]))
TEXT = st.text(CHARS, max_size=40)
BIG = st.builds(lambda s, n: s * n, st.text(CHARS, min_size=1, max_size=4), st.integers(1, 1 << 18))
FIELDS = st.lists(st.tuples(st.one_of(TEXT, st.sampled_from(sorted(RESERVED_FIELDS))), st.one_of(TEXT, BIG)), max_size=6)
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(fields=FIELDS)
@example(fields=[("rating-0", "4\x00")])
@example(fields=[("rating-0", "4\x1b")])
@example(fields=[("comment", "line one\r\nline two\r")])
@example(fields=[("c", "é😀\U0010ffff")])
def test_what_the_writer_accepts_reads_back_exactly_and_nothing_else_is_written(fields) -> None:
    try:
        xml = build_answer_xml(fields)
    except UnwritableAnswer as exc:
        assert "U+" in str(exc)
        bad = [t for n, v in fields if n not in RESERVED_FIELDS for t in (n, v)
               if any(c in t for c in "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f\x10\x11\x12\x13\x14\x15\x16"
                      "\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\ufffe\uffff") or any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
        assert bad, "refused a field XML can carry"
        return
    assert xml.isascii()
    assert parse_answer_xml(xml) == [(n, v) for n, v in fields if n not in RESERVED_FIELDS]


def test_the_issue_25_answer_is_refused_by_the_writer() -> None:
    with pytest.raises(UnwritableAnswer, match="U\\+0000"):
        build_answer_xml([("assignmentId", "A1"), ("rating-0", "4\x00")])
    with pytest.raises(UnwritableAnswer, match="U\\+001B"):
        build_answer_xml([("rating-0", "4\x1b")])


@SETTINGS
@given(raw=st.one_of(TEXT, BIG, st.binary(max_size=200),
                     st.builds(lambda a, b: '<?xml version="1.0"?><QuestionFormAnswers><Answer><QuestionIdentifier>'
                               f"{a}</QuestionIdentifier><FreeText>{b}</FreeText></Answer></QuestionFormAnswers>", TEXT, TEXT),
                     st.builds(lambda b: b"<QuestionFormAnswers><Answer><FreeText>" + b + b"</FreeText></Answer></QuestionFormAnswers>",
                               st.binary(max_size=50))))
@example(raw="<QuestionFormAnswers><Answer><QuestionIdentifier>rating-0</QuestionIdentifier>"
             "<FreeText>4\x00</FreeText></Answer></QuestionFormAnswers>")  # what the old writer produced
@example(raw="<QuestionFormAnswers><Answer><FreeText>4&#0;</FreeText></Answer></QuestionFormAnswers>")
@example(raw="<QuestionFormAnswers><Answer><FreeText>\ud800</FreeText></Answer></QuestionFormAnswers>")
@example(raw='<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x "xxxxxxxxxx"><!ENTITY y "&x;&x;&x;&x;&x;&x;&x;&x;">]>'
             "<QuestionFormAnswers><Answer><FreeText>&y;&y;&y;</FreeText></Answer></QuestionFormAnswers>")
@example(raw="<a>" * 100_000)
@example(raw="")
@example(raw=b"\xff\xfe<")
def test_the_reader_gives_fields_or_malformed_answer_for_any_input(raw) -> None:
    try:
        fields = parse_answer_xml(raw)
    except MalformedAnswer as exc:
        assert isinstance(exc, ValueError) and str(exc)
        return
    assert all(isinstance(n, str) and isinstance(v, str) for n, v in fields)


def test_the_old_writers_control_character_answer_is_a_malformed_answer_not_a_parse_error() -> None:
    """What the old writer stored for `4\\x00` (an old store may hold it): a ValueError collect keeps as invalid."""
    stored = ('<?xml version="1.0" encoding="ASCII"?><QuestionFormAnswers xmlns="x"><Answer><QuestionIdentifier>'
              "rating-0</QuestionIdentifier><FreeText>4\x00</FreeText></Answer></QuestionFormAnswers>")
    with pytest.raises(MalformedAnswer):
        parse_answer_xml(stored)
