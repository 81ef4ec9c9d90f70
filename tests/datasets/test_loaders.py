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
