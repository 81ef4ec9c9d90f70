"""An answer nobody can read is kept as invalid and the pass goes on (issue 25: the answer XML of
`4\\x00` raised ParseError, a SyntaxError that collect's `except ValueError` missed, and every later
pass died at collect)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from sqlmodel import select

from campaign.steps.collect import collect
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending
from campaign.store import AssignmentRow

# What the old writer stored for a Likert form whose rating-0 was "4\x00": XML no reader accepts.
OLD_WRITERS_ANSWER = ('<?xml version="1.0" encoding="ASCII"?><QuestionFormAnswers xmlns="http://mechanicalturk.amazonaws.com/'
                      'AWSMechanicalTurkDataSchemas/2005-10-01/QuestionFormAnswers.xsd"><Answer><QuestionIdentifier>rating-0'
                      "</QuestionIdentifier><FreeText>4\x00</FreeText></Answer></QuestionFormAnswers>")


def _posted(h):
    load_items(h.ctx)
    plan_stage(h.ctx, h.ctx.campaign.stages[0])
    post_pending(h.ctx)
    return h.hits()


def _rows(h) -> dict[str, AssignmentRow]:
    with h.ctx.store.session() as s:
        return {a.assignment_id: a for a in s.exec(select(AssignmentRow).where(AssignmentRow.campaign == h.ctx.name)).all()}


def test_an_unreadable_stored_answer_is_invalid_and_the_others_are_collected(harness, rate) -> None:
    h = harness()
    hit = _posted(h)[0]
    good = h.work("AGOOD000000001", hit.hit_id, rate(4))
    spoiled = h.work("ACTRL000000001", hit.hit_id, rate(4))
    with h.market.engine.db.transaction() as c:  # as an older marketplace stored it
        c.execute("UPDATE assignments SET answer=? WHERE id=?", (OLD_WRITERS_ANSWER, spoiled))
    assert collect(h.ctx) == 2
    rows = _rows(h)
    assert rows[good].valid
    assert not rows[spoiled].valid and "XML" in (rows[spoiled].error or "")
    assert collect(h.ctx) == 0  # the next pass runs too, and counts nothing twice


def test_a_readers_parse_error_is_an_invalid_answer_not_a_dead_pass(harness, rate) -> None:
    """Whatever a marketplace's reader lets through (here the XML parser's own ParseError, a SyntaxError)."""
    h = harness()
    hit = _posted(h)[0]
    first = h.work("AGOOD000000001", hit.hit_id, rate(4))
    second = h.work("AGOOD000000002", hit.hit_id, rate(3))
    real = h.ctx.market.answer_fields

    def reader(answer: str) -> list[tuple[str, str]]:
        fields = real(answer)
        if ("rating-0", "3") in fields:
            raise ET.ParseError("not well-formed (invalid token): line 1, column 300")
        return fields

    h.ctx.market.answer_fields = reader  # type: ignore[method-assign]
    assert collect(h.ctx) == 2
    rows = _rows(h)
    assert rows[first].valid and not rows[second].valid and "not well-formed" in (rows[second].error or "")
