import pytest

from campaign.aggregate.gold_nuggets import SpanVote, gold_nuggets


def v(worker, start, end, hit="h", tokens=None):
    return SpanVote(hit=hit, worker=worker, start=start, end=end, tokens=tokens if tokens is not None else end - start)


def test_three_distinct_workers_make_a_nugget():
    votes = [v("a", 0, 5), v("b", 0, 5), v("c", 0, 5), v("a", 0, 5), v("d", 10, 15), v("e", 10, 15)]
    gold = gold_nuggets(votes)
    assert [(g.start, g.end, g.workers) for g in gold] == [(0, 5, 3)]


def test_short_spans_dropped_and_overlaps_keep_the_longest():
    votes = [v(w, 0, 2) for w in "abc"] + [v(w, 3, 10) for w in "abc"] + [v(w, 5, 8) for w in "abcd"]
    gold = gold_nuggets(votes)
    assert [(g.start, g.end) for g in gold] == [(3, 10)]


def test_competence_weighting():
    votes = [v("good1", 0, 5), v("good2", 0, 5), v("spam1", 6, 12), v("spam2", 6, 12), v("spam3", 6, 12)]
    comp = {"good1": 0.9, "good2": 0.9, "spam1": 0.1, "spam2": 0.1, "spam3": 0.1}
    gold = gold_nuggets(votes, competence=comp, min_weight=1.5)
    assert [(g.start, g.end) for g in gold] == [(0, 5)]
    assert [(g.start, g.end) for g in gold_nuggets(votes)] == [(6, 12)]


def test_records_carry_the_sentence_and_compare_across_sentences():
    from campaign.aggregate.gold_nuggets import gold_from_records

    recs = [("h1", w, 4, 10, 14) for w in "abc"] + [("h1", w, 5, 12, 20) for w in "abcd"] + [("h2", w, 0, 0, 3) for w in "ab"]
    gold = gold_from_records(recs)
    assert [(g.hit, g.sentence, g.start, g.end, g.workers) for g in gold] == [("h1", 5, 12, 20, 4)]
    assert [(g.start, g.end) for g in gold_from_records(recs, min_workers=2)] == [(12, 20), (0, 3)]
    with pytest.raises(ValueError):
        gold_from_records([("h", "a", 0, 5, 5)])
