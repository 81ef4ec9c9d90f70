"""Each task kind's rows of the answers export (`TaskKind.answer_labels`)."""

from campaign import tasks
from campaign.tasks.kind import ANSWER_LABEL_COLUMNS


def test_likert_label_is_the_rating_and_ranking_label_the_position():
    assert tasks.get("likert").answer_labels(4.0, {}) == [{"label": 4}]
    assert tasks.get("ranking").answer_labels(2.0, {}) == [{"label": 2}]


def test_nugget_labels_are_one_row_per_span_and_one_row_for_a_sentence_without_any():
    kind = tasks.get("nuggets")
    rows = kind.answer_labels(2.0, {"spans": [[0, 4], [7, 9]]})
    assert rows == [{"label": 1, "first": 0, "last": 4}, {"label": 1, "first": 7, "last": 9}]
    assert kind.answer_labels(0.0, {"spans": [], "keywords": ["a", "b"]}) == [{"label": 0}]
    for r in rows:
        assert set(r) <= set(ANSWER_LABEL_COLUMNS)


def test_only_the_nugget_kind_keeps_free_text_in_its_judgments():
    assert tasks.get("nuggets").free_text_extra == ("keywords",)
    assert tasks.get("likert").free_text_extra == () and tasks.get("ranking").free_text_extra == ()
