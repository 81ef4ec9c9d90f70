import numpy as np
import pytest

from campaign.bench import ranking
from campaign.paths import shared_data_dir
from tests.test_jsonout import strict


@pytest.fixture(scope="module")
def quick_json():
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = ranking.main(["--quick", "--json", "--no-real"])
    assert rc == 0
    return buf.getvalue()


@pytest.mark.slow
def test_quick_json_has_contracted_shape(quick_json):
    data = strict(quick_json)  # exactly one object, nothing else on stdout, no NaN (tests/test_jsonout.py leaves it here)
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
    assert set(t) >= {"random_rankings_final_top50", "adaptive_pairs", "ratio", "goal", "met", "beats_random_rankings",
                      "worst_margin_over_random_rankings", "vs_random_pairs"}
    assert t["goal"] == 0.70 and t["beats_random_rankings_from"] == 300


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


def test_oracle_allocation_spends_the_budget_near_the_boundary():
    truth = np.linspace(1.0, 0.0, 100)
    k = ranking.oracle_allocation(truth, keep=50, appearances=450.0, floor=3.0)
    assert k.sum() == pytest.approx(450.0, rel=0.01)
    assert k.min() >= 3.0
    middle, far = k[25:35].mean(), np.r_[k[:10], k[-10:]].mean()
    assert middle > far + 0.5  # extra looks go where a few more can still settle the side of the boundary
    assert k[48:52] == pytest.approx(np.full(4, 3.0), abs=0.05)  # coin flips at this budget: the floor only
    # no budget beyond the floor: everyone gets the floor and nothing more
    assert ranking.oracle_allocation(truth, keep=50, appearances=300.0, floor=3.0) == pytest.approx(np.full(100, 3.0))


@pytest.mark.slow
def test_limits_show_what_a_ranking_pair_is_worth():
    s = ranking.Settings(items=100, seeds=4, max_pairs=600, step=100)
    result = ranking.run(s, mode_check=False, real=False, with_limits=True)
    lim = result["limits"]
    assert lim["goal_pairs"] == 360
    assert [r["pairs"] for r in lim["adaptive_pairs"]] == list(range(100, 601, 100))
    at_600 = {name: curve[-1]["top50"]["mean"] for name, curve in
              (("adaptive_pairs", lim["adaptive_pairs"]), ("random_rankings", result["strategies"]["random_rankings"]))}
    # ten pairs derived from one 5-item ranking carry less than ten independent pairs: the planner spending
    # single pairs is well ahead of random rankings at the same count of pairs
    assert at_600["adaptive_pairs"] > at_600["random_rankings"] + 0.03
    assert 0.2 < lim["ranking_pair_worth"] < 0.95


def _curve(values: list[float]) -> list[dict]:
    return [{"pairs": 100 * (k + 1), "top50": {"mean": v, "sd": 0.0}} for k, v in enumerate(values)]


def test_a_tie_is_not_behind_but_does_not_beat():
    rankings = [0.1, 0.2, 0.30, 0.40, 0.50]
    strategies = {"random_rankings": _curve(rankings), "random_pairs": _curve(rankings),
                  "adaptive": _curve([0.0, 0.0, 0.32, 0.40, 0.60])}  # level at 400 pairs, behind before 300
    t = ranking.target_check(strategies, 500)
    assert t["never_behind_random_rankings"] and not t["beats_random_rankings"]
    assert t["margins_over_random_rankings"] == pytest.approx({300: 0.02, 400: 0.0, 500: 0.1})
    strategies["adaptive"] = _curve([0.0, 0.0, 0.32, 0.38, 0.60])
    assert not ranking.target_check(strategies, 500)["never_behind_random_rankings"]


def test_first_seed_moves_the_seeds():
    base = ranking.Settings(items=20, seeds=1, max_pairs=60, step=30, keep=10, batch_pairs=20)
    one = ranking.run(ranking.Settings(**{**base.__dict__, "first_seed": 1}), mode_check=False, real=False)
    both = ranking.run(ranking.Settings(**{**base.__dict__, "seeds": 2}), mode_check=False, real=False)
    zero = ranking.run(base, mode_check=False, real=False)
    for name in ranking.STRATEGIES:  # the mean of seeds 0 and 1 is the mean of the two one-seed runs
        for r0, r1, r2 in zip(zero["strategies"][name], one["strategies"][name], both["strategies"][name]):
            assert r2["top50"]["mean"] == pytest.approx((r0["top50"]["mean"] + r1["top50"]["mean"]) / 2)
