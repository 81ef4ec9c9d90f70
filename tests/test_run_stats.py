"""How often a daemon rewrites its run statistics: the file holds every pass of the run, so rewriting it on
a fixed beat cost more and more of the daemon as the run grew."""

from __future__ import annotations

from campaign.daemon import STATS_EVERY, STATS_SHARE, next_stats_at


def test_a_quick_write_comes_back_on_the_fixed_beat() -> None:
    assert next_stats_at(100.0, 0.002) == 100.0 + STATS_EVERY


def test_a_slow_write_is_spaced_to_stay_within_its_share() -> None:
    took = 0.2  # 4% of a 5 s beat
    at = next_stats_at(100.0, took)
    assert at == 100.0 + took / STATS_SHARE
    assert took / (at - 100.0) <= STATS_SHARE
