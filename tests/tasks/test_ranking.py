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


class _Data:
    """A finished ranking stage's answers as `StageData` gives them to the export."""

    def __init__(self, campaign, counted, agreement):
        self.campaign, self.seed, self._counted, self._agreement = campaign, 0, counted, agreement

    def counted(self, stage):
        return self._counted if stage == "ranking" else []

    def texts(self):
        return {}

    def items(self):
        return list("abcde")

    def scores(self, stage):
        return [{"item": i, "score": 5.0 - n, "n": 5, "sd": 0.0, "text": ""} for n, i in enumerate("abcde")]

    def candidates(self, stage):
        return list("abcde")

    def agreement(self, stage):
        return self._agreement


def test_orders_count_by_their_workers_agreement_with_the_crowd():
    from campaign.spec import load_spec
    from campaign.tasks.kind import CountedJudgment
    from tests.support.paths import ROOT

    campaign = load_spec(ROOT / "examples" / "two-stage.yaml").campaigns[0]
    counted = []
    answers = [("W1", "abcde"), ("W2", "abcde")] + [("S", "edcba")] * 3  # three orders of a worker who agrees with nobody
    for n, (worker, order) in enumerate(answers):
        counted += [CountedJudgment(item_key=i, value=float(p), extra={}, assignment_id=f"A{n}", worker_id=worker,
                                    hit_key=f"ranking-b000-{n:04d}") for p, i in enumerate(order, start=1)]
    stage = campaign.stage("ranking")
    kind = ranking.RankingKind()
    alike = [r["item"] for r in kind.export(stage, _Data(campaign, counted, {})).rows]
    assert alike[0] == "e"  # unmeasured, every order counts the same: three against two
    weighed = kind.export(stage, _Data(campaign, counted, {"W1": 0.8, "W2": 0.7, "S": -0.4})).rows
    assert [r["item"] for r in weighed] == list("abcde")
    assert {r["item"]: r["comparisons"] for r in weighed}["a"] == 20  # the counts stay counts of comparisons


def test_answer_weights_are_agreement_floored_and_the_median_for_the_unmeasured():
    assert ranking.answer_weights({"A": 0.8, "B": -0.3, "C": 0.4}, ["A", "B", "C", "D"]) == [0.8, ranking.MIN_WEIGHT, 0.4, 0.4]
    assert ranking.answer_weights({}, ["A"]) == [1.0]
