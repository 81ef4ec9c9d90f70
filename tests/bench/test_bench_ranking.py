import json

import pytest

from campaign.bench import ranking
from campaign.paths import shared_data_dir


@pytest.fixture(scope="module")
def quick_json():
    import io
    import contextlib

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = ranking.main(["--quick", "--json", "--no-real"])
    assert rc == 0
    return buf.getvalue()


def test_quick_json_has_contracted_shape(quick_json):
    data = json.loads(quick_json)  # exactly one object, nothing else on stdout
    assert set(data["strategies"]) == {"random_pairs", "random_rankings", "adaptive"}
    for name, rows in data["strategies"].items():
        assert [r["pairs"] for r in rows] == list(range(100, 601, 100)), name
        for r in rows:
            for metric in ("spearman", "top25", "top50"):
                assert set(r[metric]) == {"mean", "sd"}
                assert -1.0 <= r[metric]["mean"] <= 1.0 and r[metric]["sd"] >= 0
            assert 0.0 <= r["top25"]["mean"] <= 1.0 and 0.0 <= r["top50"]["mean"] <= 1.0
        # more comparisons help: the last checkpoint beats the first on Spearman
        assert rows[-1]["spearman"]["mean"] > rows[0]["spearman"]["mean"] + 0.1
        assert rows[-1]["spearman"]["mean"] > 0.5
    t = data["target"]
    assert set(t) >= {"random_pairs_final_top50", "adaptive_pairs", "ratio", "goal", "met"}


def test_same_seed_same_output():
    s = ranking.Settings(items=20, seeds=2, max_pairs=60, step=30, keep=10, batch_pairs=20)
    a = ranking.run(s, mode_check=False, real=False)
    b = ranking.run(s, mode_check=False, real=False)
    assert a == b


def test_table_output_and_bad_flags(capsys):
    assert ranking.main(["--items", "20", "--seeds", "2", "--max-pairs", "60", "--step", "30", "--keep", "10",
                         "--no-real", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "random_rankings" in out and "target:" in out
    with pytest.raises(SystemExit):
        ranking.main(["--items", "3"])


@pytest.mark.skipif(shared_data_dir() is None or not (shared_data_dir() / "ukpconvarg1").is_dir(),
                    reason="needs ../shared/data/ukpconvarg1 (real crowd data), absent on a fresh clone")
def test_ukpconvarg1_refit_agrees_with_published_ranking():
    rho = ranking.ukpconvarg1_spearman()
    assert rho is not None and len(rho) == 32  # every topic, including the one spelled two ways
    mean = sum(rho.values()) / len(rho)
    assert mean > 0.85
    assert min(rho.values()) > 0.5
