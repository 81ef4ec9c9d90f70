from collections import Counter

import pytest

from campaign.crowd.forms import parse_form
from campaign.tasks import likert
from campaign.tasks.base import InvalidAnswer, ShownItem

KEYS = [f"p{i:02d}" for i in range(23)]


def test_plan_is_deterministic_and_covers_every_item():
    a = likert.plan(KEYS, "likert", 5, seed=7)
    b = likert.plan(list(reversed(KEYS)), "likert", 5, seed=7)
    assert a == b
    assert all(len(d.item_keys) == 5 and len(set(d.item_keys)) == 5 for d in a)
    counts = Counter(k for d in a for k in d.item_keys)
    assert set(counts) == set(KEYS) and min(counts.values()) >= 1
    assert len(a) == 5  # 23 items -> 4 full HITs and one topped-up HIT
    assert likert.plan(KEYS, "likert", 5, seed=8) != a


def test_trap_share_puts_one_trap_into_that_share_of_hits():
    drafts = likert.plan(KEYS * 1, "likert", 5, seed=1, trap_keys=["trap:likert:0"], trap_share=0.4)
    with_trap = [d for d in drafts if any(k.startswith("trap:") for k in d.item_keys)]
    assert len(with_trap) == 2
    assert all(sum(k.startswith("trap:") for k in d.item_keys) == 1 for d in with_trap)


def test_render_escapes_untrusted_text_and_the_form_parses():
    items = [ShownItem("a", '<script>alert("x")</script> & more'), ShownItem("b", "]]> breaks CDATA")]
    xml = likert.render(items, "Topic <b>", "Title")
    assert "<script>alert" not in xml and "&lt;script&gt;" in xml
    assert "Topic &lt;b&gt;" in xml
    html = xml.split("<![CDATA[", 1)[1]
    form = parse_form(html.replace("]]]]><![CDATA[>", "]]>"))
    assert [s.radio_name for s in form.slots] == ["rating-0", "rating-1"]
    assert form.slots[0].text == '<script>alert("x")</script> & more'
    assert form.slots[0].radio_values == ["5", "4", "3", "2", "1"]


def test_parse_validates_against_the_hits_items():
    keys = ["a", "b"]
    js = likert.parse([("assignmentId", "X"), ("rating-0", "5"), ("rating-1", "1")], keys)
    assert [(j.item_key, j.value) for j in js] == [("a", 5.0), ("b", 1.0)]
    for bad in ([("rating-0", "5")], [("rating-0", "6"), ("rating-1", "1")], [("rating-0", "5"), ("rating-1", "1"), ("rating-1", "2")],
                [("rating-0", "5"), ("rating-1", "1"), ("rating-9", "1")]):
        with pytest.raises(InvalidAnswer):
            likert.parse(bad, keys)


def test_aggregate_mean_n_sd_and_no_traps():
    rows = likert.aggregate({"a": [5, 4, 3], "b": [1, 1], "trap:likert:0": [1, 1]})
    assert rows[0] == {"item": "a", "score": 4.0, "n": 3, "sd": 1.0, "rank": 1}
    assert rows[1]["item"] == "b" and rows[1]["sd"] == 0.0
    assert len(rows) == 2
