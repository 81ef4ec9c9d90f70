"""The dashboard's arithmetic on plain numbers: sparklines, buckets, weighted series, projections,
liveness, and the key decoder."""

from __future__ import annotations

from campaign.dashboard.app import split_keys
from campaign.readmodel.series import (
    Buckets,
    ClockFix,
    human_seconds,
    liveness,
    projection,
    recent_rate,
    resample,
    sparkline,
    weighted_series,
)


def test_sparkline_scale_gaps_and_width():
    assert sparkline([0.0, 0.5, 1.0], 3, 0.0, 1.0) == "▁▅█"
    assert sparkline([None, 1.0], 2, 0.0, 1.0) == " █"
    assert sparkline([], 5) == ""
    assert len(sparkline(list(range(100)), 10)) == 10
    assert sparkline([None, None], 4) == "  "


def test_resample_averages_groups():
    assert resample([1, 3, 5, 7], 2) == [2, 6]
    assert resample([1, None, None, None], 2) == [1, None]


def test_buckets_clamp():
    b = Buckets(start=0.0, end=100.0, n=10)
    assert b.index(-5) == 0 and b.index(55) == 5 and b.index(1000) == 9


def test_weighted_series_weights_by_work_in_each_bucket():
    counts = [("a", 0, 3), ("b", 0, 1), ("b", 1, 2), ("c", 1, 5)]
    value = {"a": 1.0, "b": 0.0, "c": None}
    assert weighted_series(counts, value, 3) == [0.75, 0.0, None]


def test_rate_and_projection():
    assert recent_rate([0, 10, 20], 1800.0, last=2) == 30.0  # 30 answers in one hour
    assert projection(60, 30.0, 1000.0) == 1000.0 + 2 * 3600
    assert projection(0, 0.0, 5.0) == 5.0
    assert projection(10, 0.0, 5.0) is None


def test_liveness_and_clock():
    assert liveness(100.0, [95.0, None], 10.0, finished=False).live
    dead = liveness(100.0, [50.0], 10.0, finished=False)
    assert not dead.live and "50s" in dead.message
    assert not liveness(100.0, [], 10.0, finished=False).live
    assert not liveness(100.0, [99.0], 10.0, finished=True).live
    fix = ClockFix(wall=100.0, clock=1000.0, speed=60.0)
    assert fix.at(101.0, running=True) == 1060.0 and fix.at(101.0, running=False) == 1000.0


def test_human_seconds():
    assert [human_seconds(x) for x in (5, 65, 700, 3 * 3600 + 5 * 60, 2 * 86400 + 4 * 3600, -30)] == \
        ["5s", "1m05s", "11m", "3h05m", "2d04h", "-30s"]


def test_split_keys_arrows_and_partial_escape():
    assert split_keys("j\x1b[Bk\x1b[A") == (["j", "DOWN", "k", "UP"], "")
    assert split_keys("p\x1b[") == (["p"], "\x1b[")
    assert split_keys("\x1b") == (["\x1b"], "")
