import json

import pytest

from campaign.crowd.forms import parse_form
from campaign.tasks import nuggets
from campaign.tasks.base import InvalidAnswer, ShownItem

TEXTS = ["Bottled water costs more than tap water .", "It is sold everywhere .", "Short one ."]
KEYS = ["d1:0", "d1:1", "d1:2"]


def test_windows_stay_inside_one_document():
    sents = [("d1", f"d1:{i}") for i in range(9)] + [("d2", f"d2:{i}") for i in range(3)]
    drafts = nuggets.plan(sents, "nuggets", 7)
    # 9 sentences are two balanced windows (5+4), not 7+2: a 2-sentence HIT would be paid like a full one
    assert [len(d.item_keys) for d in drafts] == [5, 4, 3]
    assert all(len({k.split(":")[0] for k in d.item_keys}) == 1 for d in drafts)


def test_parse_keeps_explicit_empty_sentences():
    js = nuggets.parse([("nuggets", json.dumps([[0, 0, 4]])), ("keywords", "")], KEYS, TEXTS)
    assert [(j.item_key, j.value) for j in js] == [("d1:0", 1.0), ("d1:1", 0.0), ("d1:2", 0.0)]
    assert js[0].extra["spans"] == [[0, 4]] and js[1].extra["spans"] == []


def test_none_needs_two_or_three_keywords():
    js = nuggets.parse([("nuggets", "[]"), ("none", "1"), ("keywords", "water, bottles")], KEYS, TEXTS)
    assert all(j.value == 0 for j in js) and js[0].extra["keywords"] == ["water", "bottles"]
    for kw in ("water", "a b c d", ""):
        with pytest.raises(InvalidAnswer):
            nuggets.parse([("nuggets", "[]"), ("keywords", kw)], KEYS, TEXTS)


@pytest.mark.parametrize("spans", [[[0, 0, 1]], [[0, 5, 9]], [[3, 0, 2]], [[0, 3, 1]], [[0, "a", 2]], "x"])
def test_spans_are_checked_against_the_shown_text(spans):
    with pytest.raises(InvalidAnswer):
        nuggets.parse([("nuggets", json.dumps(spans) if spans != "x" else "not json")], KEYS, TEXTS)


def test_verb_rule_when_asked():
    with pytest.raises(InvalidAnswer, match="no verb"):
        nuggets.parse([("nuggets", json.dumps([[2, 0, 2]]))], KEYS, ["x", "y", "Green glass bottles"], require_verb=True)
    assert nuggets.parse([("nuggets", json.dumps([[0, 0, 4]]))], KEYS, TEXTS, require_verb=True)[0].value == 1


def test_render_escapes_tokens_and_parses_as_a_form():
    xml = nuggets.render([ShownItem("k", "<b>bold</b> & co")], "T", "Title")
    assert "<b>bold</b>" not in xml and "&lt;b&gt;bold&lt;/b&gt;" in xml
    form = parse_form(xml.split("<![CDATA[", 1)[1])
    assert form.data["task"] == "nuggets" and "nuggets" in form.hidden and "keywords" in form.text_inputs
