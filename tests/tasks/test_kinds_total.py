"""Every task kind's answer parsing is total: any fields at all give judgments for the HIT's own items
or `InvalidAnswer`, never another exception (issue 25: one answer that raised something else stalled
collect for good)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from campaign import tasks
from campaign.tasks import stage_types
from campaign.tasks.base import InvalidAnswer, Judgment, ShownItem
from campaign.untrusted import text_problem

# Every character, surrogates included, with control characters and XML's troublemakers made common.
NASTY_CHAR = st.sampled_from(["\x00", "\x1b", "\x7f", "\x85", "\ud800", "\udfff", "\ufffe", "\r", "\x1c", "²", "٣",
                              "\u2005", "<", "&"])
NASTY = st.one_of(NASTY_CHAR, st.sampled_from(["]]>", "&#0;", "\r\n"]))
CHARS = st.one_of(st.characters(exclude_categories=()), NASTY_CHAR)
TEXT = st.text(CHARS, max_size=30)
BIG = st.builds(lambda s, n: s * n, st.text(CHARS, min_size=1, max_size=4), st.integers(1, 1 << 18))  # up to ~1 MB
# Values shaped like real answers, then spoiled.
SHAPED = st.one_of(
    st.sampled_from(["1", "2", "3", "4", "5", " 4 ", "4\x00", "0,1,2,3,4", "4,3,2,1,0", "0,1,2,3,²", "0,1,2,3,٣",
                     "[[0,0,2]]", "[[0, 0, 5], [1, 1, 3]]", "[]", "{}", "[" * 100_000, "[[0,0," + "9" * 5000 + "]]",
                     "[[0,0,1e999]]", "[[0,0,NaN]]", "summary topic", "a\x00 b"]),
    st.builds(lambda parts: ",".join(parts), st.lists(st.sampled_from(["0", "1", "2", "3", "4", "5", "-1", "", "07"]),
                                                      max_size=7)),
    st.builds(json.dumps, st.lists(st.lists(st.integers(-3, 12), min_size=0, max_size=4), max_size=6)),
    st.builds(lambda base, nasty, at: base[:at] + nasty + base[at:], st.sampled_from(["4", "0,1,2,3,4", "[[0,0,2]]"]),
              NASTY, st.integers(0, 9)),
)
VALUE = st.one_of(SHAPED, TEXT, BIG)
NAMES = st.one_of(st.sampled_from(["rating-0", "rating-1", "rating-2", "rating-4", "order", "nuggets", "keywords",
                                   "none", "comment", "assignmentId", "prolific_submission_id"]), TEXT)
FIELDS = st.lists(st.tuples(NAMES, VALUE), max_size=8)
ITEM_TEXT = st.sampled_from(["The tax cut was passed by the senate.", "It rains.", "Prices rose sharply after the ban",
                             "", "one two three four five six seven eight"])
ITEMS = st.lists(ITEM_TEXT, min_size=1, max_size=7).map(lambda ts: [ShownItem(key=f"i{n}", text=t) for n, t in enumerate(ts)])


def _stage(kind: str):
    cls = stage_types()[kind]
    extra = {"require_verb": True} if kind == "nuggets" else {}
    return cls(name=f"s-{kind}", **extra)


@pytest.mark.parametrize("kind", sorted(tasks.names()))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(fields=FIELDS, items=ITEMS)
@example(fields=[("rating-0", "4\x00")], items=[ShownItem("i0", "x")])
@example(fields=[("order", "0,1,2,3,²")], items=[ShownItem(f"i{n}", "x") for n in range(5)])
@example(fields=[("order", "0," + "1" * 5000)], items=[ShownItem("i0", "x"), ShownItem("i1", "y")])
@example(fields=[("nuggets", "[" * 100_000)], items=[ShownItem("i0", "a b c d")])
@example(fields=[("nuggets", "[[0,0," + "9" * 5000 + "]]")], items=[ShownItem("i0", "a b c d")])
def test_any_fields_give_judgments_of_the_hits_items_or_invalid_answer(kind: str, fields, items) -> None:
    k = tasks.get(kind)
    try:
        judgments = k.parse(_stage(kind), fields, items)
    except InvalidAnswer as exc:
        assert str(exc)  # says why
        return
    keys = {i.key for i in items}
    assert judgments and all(isinstance(j, Judgment) and j.item_key in keys for j in judgments)
    assert all(isinstance(j.value, float) and j.value == j.value for j in judgments)  # finite numbers, no NaN
    json.dumps([dict(j.extra) for j in judgments])  # what collect stores must serialise
    assert all(text_problem(t) is None for j in judgments for t in _strings(j.extra))  # nothing the doors refuse


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in [*_strings(k), *_strings(v)]]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _strings(v)]
    return []


@pytest.mark.parametrize("kind", sorted(tasks.names()))
@pytest.mark.parametrize("bad", ["\x00", "\x1b", "\x7f", "\x9f", "\ud800", "\uffff", "\x1c"])
def test_a_control_character_in_an_otherwise_valid_answer_is_invalid(kind: str, bad: str) -> None:
    """`4\\x1c` used to read as 4 (str.strip() takes \\x1c for white space); every kind refuses it now."""
    items = [ShownItem(f"i{n}", "The prices increased after the ban on imports") for n in range(5)]
    good = {"likert": [(f"rating-{n}", "4") for n in range(5)], "ranking": [("order", "4,3,2,1,0")],
            "nuggets": [("nuggets", "[[0, 0, 3]]"), ("keywords", "")]}[kind]
    assert tasks.get(kind).parse(_stage(kind), good, items)  # the clean answer is valid
    spoiled = [(name, value + bad if n == 0 else value) for n, (name, value) in enumerate(good)]
    with pytest.raises(InvalidAnswer, match="U\\+"):
        tasks.get(kind).parse(_stage(kind), spoiled, items)


def test_unicode_digits_are_not_positions() -> None:
    """"²".isdigit() is True and int("²") raises ValueError; "٣" read as 3. Both are InvalidAnswer now."""
    items = [ShownItem(f"i{n}", "x") for n in range(5)]
    for order in ("0,1,2,3,²", "0,1,2,٣,4", "0,1,2,3," + "4" * 5000):
        with pytest.raises(InvalidAnswer):
            tasks.get("ranking").parse(_stage("ranking"), [("order", order)], items)
