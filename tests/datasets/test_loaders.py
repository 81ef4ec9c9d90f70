import pytest

from campaign.paths import shared_data_dir

pytestmark = pytest.mark.skipif(shared_data_dir() is None, reason="needs ../shared/data (real crowd data), absent on a fresh clone")


def test_snow2008_sizes():
    from campaign.datasets import snow2008

    labels, gold = snow2008.load("rte")
    assert (len(labels), len(gold), len({w for _, w, _ in labels})) == (8000, 800, 164)
    with pytest.raises(ValueError):
        snow2008.load("nope")


def test_ukpconvarg1_sizes():
    from campaign.datasets import ukpconvarg1

    j = ukpconvarg1.load()
    assert (len(j.labels), len(j.gold), len(j.competence)) == (84445, 16081, 3815)


def test_snow2008_mace_format_holds_the_same_labels():
    from campaign.datasets import snow2008

    matrix, gold = snow2008.load_mace_format("temp")
    labels, _ = snow2008.load("temp")
    assert matrix.shape == (462, 76) and len(gold) == 462
    assert sum(1 for v in matrix.ravel() if v != "") == len(labels) == 4620


def test_ukpconvarg1_ranking():
    from campaign.datasets import ukpconvarg1

    ranking = ukpconvarg1.load_ranking()
    assert len(ranking) == 32 and sum(len(v) for v in ranking.values()) == 1052
    first = ranking["evolution-vs-creation_creation"][0]
    assert (first.arg_id, first.score) == ("71559", 0.00593)


def test_snow2008_numeric_tasks():
    from campaign.datasets import snow2008

    sizes = {}
    for task in snow2008.NUMERIC:
        ratings, gold = snow2008.load_numeric(task)
        sizes[task] = (len(ratings), len(gold))
        assert all(r.item in gold for r in ratings)
    assert sizes["wordsim"] == (300, 30) and sizes["surprise"] == (1000, 100)
    with pytest.raises(ValueError):
        snow2008.load_numeric("rte")
