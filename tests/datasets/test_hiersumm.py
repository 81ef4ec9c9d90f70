import pytest

from campaign.paths import shared_data_dir
from tests.support.cli import run_campaign
from tests.test_jsonout import strict

pytestmark = pytest.mark.skipif(shared_data_dir() is None, reason="needs ../shared/data (real crowd data), absent on a fresh clone")


def test_rebuilt_hits_hold_every_row_in_order():
    from campaign.datasets import hiersumm

    hits, spans, lost = hiersumm.load_topic("1002")
    assert all(len(h.sentences) <= 7 for h in hits)
    assert lost < 0.01 * (len(spans) + lost)
    s = spans[0]
    assert hiersumm.norm(" ".join(hits[s.hit].tokens[s.first:s.last + 1])).find(hiersumm.norm(s.text)) >= 0
    for s in spans[:500]:  # the sentence offsets point at the same tokens as the HIT offsets
        h = hits[s.hit]
        words = h.sentences[s.sentence - 7 * s.hit].split()
        assert words[s.sentence_first] == h.tokens[s.first]
        assert h.token_sentence[s.first] == s.sentence


@pytest.mark.slow
def test_bench_nuggets_close_to_the_published_figures():
    """Also the strict-JSON check of `bench nuggets --json` (tests/test_jsonout.py leaves it to this test:
    the benchmark has no lighter options, and running it twice cost CI 17 s)."""
    out = run_campaign("bench", "nuggets", "--json", timeout=300, check=True).stdout
    data = strict(out)
    assert isinstance(data, dict)
    assert data["rebuild"]["hits"] == 5119 and data["rebuild"]["rows"] == 68234
    assert abs(data["gold_nuggets"]["count"] - 4983) / 4983 < 0.05
    assert data["gold_nuggets"]["match_rate"] >= 0.95
    a = data["agreement"]
    assert abs(a["ao"] - 0.664) < 0.03 and abs(a["kappa"] - 0.149) < 0.03 and abs(a["alpha_u"] - 0.201) < 0.05
    assert len(data["differences"]) >= 3
