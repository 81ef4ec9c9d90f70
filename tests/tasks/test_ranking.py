import pytest

from campaign.crowd.forms import parse_form
from campaign.tasks import ranking
from campaign.tasks.base import InvalidAnswer, ShownItem

KEYS = ["a", "b", "c", "d", "e"]


def test_parse_requires_a_full_permutation():
    js = ranking.parse([("assignmentId", "x"), ("order", "2,0,1,4,3")], KEYS)
    assert [(j.item_key, j.value) for j in js] == [("c", 1.0), ("a", 2.0), ("b", 3.0), ("e", 4.0), ("d", 5.0)]
    for bad in ("0,1,2,3", "0,1,2,3,3", "0,1,2,3,5", "0,1,2,3,x", ""):
        with pytest.raises(InvalidAnswer):
            ranking.parse([("order", bad)], KEYS)


def test_a_ranking_of_five_yields_ten_pairs():
    js = ranking.parse([("order", "4,3,2,1,0")], KEYS)
    ps = ranking.pairs(js)
    assert len(ps) == 10
    assert ps[0] == ("e", "d") and ("e", "a") in ps and ("a", "e") not in ps


def test_render_escapes_and_offers_keyboard_and_drag():
    xml = ranking.render([ShownItem(k, f"<i>{k}</i>") for k in KEYS], "T & T", "Title")
    assert "&lt;i&gt;a&lt;/i&gt;" in xml and "<i>a</i>" not in xml
    assert 'draggable="true"' in xml and "ArrowUp" in xml
    page = xml.split("<![CDATA[", 1)[1]
    form = parse_form(page)
    assert form.data.get("task") == "ranking"
    assert [s.text for s in form.slots] == [f"<i>{k}</i>" for k in KEYS]
    assert form.hidden["order"] == "0,1,2,3,4"
