"""The Prolific benchmark's place-wait reckoning (a pure function of a study's history)."""

from __future__ import annotations

from campaign.bench.prolific import place_waits

H = 3600.0


def _sub(i: int, start: float, status: str = "APPROVED", **kw: float) -> dict:
    return {"id": f"s{i}", "started_at": start, "status": status, **kw}


def test_places_filled_in_the_order_they_opened() -> None:
    log = [{"event": "publish", "at": 0.0, "total": 2}]
    filled, unfilled = place_waits(log, [_sub(1, 0.5 * H), _sub(2, 2 * H)], {}, None)
    assert filled == [0.5 * H, 2 * H] and unfilled == []


def test_a_returned_place_opens_again_and_waits_for_the_next_participant() -> None:
    log = [{"event": "publish", "at": 0.0, "total": 1}]
    subs = [_sub(1, 0.0, "RETURNED", returned_at=1 * H), _sub(2, 4 * H)]
    filled, unfilled = place_waits(log, subs, {}, None)
    assert filled == [0.0, 3 * H] and unfilled == []


def test_a_timed_out_place_opens_at_its_deadline_and_a_rejected_one_at_its_rejection() -> None:
    log = [{"event": "publish", "at": 0.0, "total": 2}]
    subs = [_sub(1, 0.0, "TIMED-OUT"), _sub(2, 0.0, "REJECTED"), _sub(3, 3 * H), _sub(4, 5 * H)]
    filled, _ = place_waits(log, subs, {"s2": 1 * H}, max_minutes=120)
    assert sorted(filled) == [0.0, 0.0, 2 * H, 3 * H]  # s3 took the rejected place (open since 1 h), s4 the timed-out one (2 h)


def test_places_open_when_the_study_stops_count_as_unfilled_until_the_stop() -> None:
    log = [{"event": "publish", "at": 0.0, "total": 3}, {"event": "places", "at": 1 * H, "total": 4},
           {"event": "stop", "at": 6 * H, "total": 4}]
    filled, unfilled = place_waits(log, [_sub(1, 0.0), _sub(2, 2 * H)], {}, None)
    assert filled == [0.0, 2 * H] and sorted(unfilled) == [5 * H, 6 * H]


def test_a_paused_study_waits_for_nobody() -> None:
    log = [{"event": "publish", "at": 0.0, "total": 1}, {"event": "pause", "at": 1 * H, "total": 1},
           {"event": "start", "at": 10 * H, "total": 1}]
    filled, unfilled = place_waits(log, [_sub(1, 10.5 * H)], {}, None)
    assert unfilled == [1 * H] and filled == [0.5 * H]
