"""A daemon and a crowd working a standalone marketplace follow its clock (`GET /clock`).

At 470,000 propositions the daemons ran on the wall clock while the marketplace ran 600 times faster:
every submission looked as if made in the future, review's "late" rule never held work back for less
than half the auto-approval delay, and 34 answers were auto-approved by the marketplace unreviewed.
"""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest

from campaign.clock import ScaledClock, WallClock
from campaign.daemon import RunError, make_clock
from campaign.market.server import start_market
from campaign.marketplaces.remote_clock import ClockUnavailable, marketplace_clock, parse_clock
from campaign.spec import load_spec
from tests.support.specs import campaign, simulated, write_spec


@pytest.fixture
def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def fast_market(tmp_path):
    market = start_market(tmp_path / "market", clock=ScaledClock(600.0, start=1_800_000_000.0))
    yield market
    market.stop()


def _spec(tmp_path, endpoint: str, kind: str = "simulated"):
    crowd = simulated(5, speed=600) if kind == "simulated" else {"kind": "none"}
    config = write_spec(tmp_path / "campaigns.yaml", campaign("follow", task={"kind": "likert", "reward": "0.06"}, budget="5.00",
                                                              marketplace="local", endpoint_url=endpoint, crowd=crowd))
    return list(load_spec(config).campaigns)


def test_the_marketplace_tells_its_simulated_time(fast_market):
    with urllib.request.urlopen(fast_market.endpoint_url + "/clock", timeout=5) as resp:
        assert resp.headers["Cache-Control"] == "no-store"
        data = json.loads(resp.read())
    assert data["speed"] == 600.0
    assert 1_800_000_000.0 <= data["now"] < 1_800_000_000.0 + 600 * 60


def test_a_followed_clock_tells_the_marketplaces_time_at_its_speed(fast_market):
    clock = marketplace_clock(fast_market.endpoint_url)
    assert isinstance(clock, ScaledClock) and clock.speed == 600.0
    theirs = fast_market.engine.clock.now()
    ours = clock.now()
    # a loopback request takes milliseconds: a few simulated seconds at speed 600, not the minutes a
    # clock started on its own a second later would be off by
    assert abs(ours - theirs) < 30.0


def test_a_daemon_whose_simulated_crowd_works_a_standalone_marketplace_follows_its_clock(tmp_path, fast_market):
    clock = make_clock(_spec(tmp_path, fast_market.endpoint_url), tmp_path / "state", live=True)
    assert isinstance(clock, ScaledClock) and clock.speed == 600.0
    assert abs(clock.now() - fast_market.engine.clock.now()) < 30.0


def test_real_people_on_a_standalone_marketplace_keep_the_wall_clock(tmp_path, fast_market):
    assert isinstance(make_clock(_spec(tmp_path, fast_market.endpoint_url, kind="none"), tmp_path / "state"), WallClock)


def test_a_marketplace_on_the_wall_clock_is_followed_as_the_wall_clock(tmp_path):
    market = start_market(tmp_path / "market")
    try:
        assert isinstance(marketplace_clock(market.endpoint_url), WallClock)
    finally:
        market.stop()


def test_a_daemon_refuses_to_start_when_the_marketplace_does_not_tell_its_time(tmp_path, unused_port, monkeypatch):
    monkeypatch.setattr("campaign.marketplaces.remote_clock.PAUSE", 0.01)
    campaigns = _spec(tmp_path, f"http://127.0.0.1:{unused_port}")
    with pytest.raises(RunError, match=r"/clock did not answer .*is the marketplace"):
        make_clock(campaigns, tmp_path / "state", live=True)


@pytest.mark.parametrize("body", [b"", b"[]", b'{"now": 1}', b'{"now": "x", "speed": 1}', b'{"now": 1e9, "speed": 0}',
                                  b'{"now": NaN, "speed": 1}', b'{"now": 1e9, "speed": Infinity}', b'{"now": true, "speed": 1}',
                                  b"\xff\xfe"])
def test_an_answer_that_is_not_a_clock_is_refused(body):
    with pytest.raises(ValueError):
        parse_clock(body)


def test_a_good_answer_is_read():
    assert parse_clock(b'{"now": 1800000000.5, "speed": 600}') == (1_800_000_000.5, 600.0)


def test_an_unreachable_marketplace_is_said_once_its_tries_are_spent(unused_port):
    with pytest.raises(ClockUnavailable, match=f"127.0.0.1:{unused_port}/clock"):
        marketplace_clock(f"http://127.0.0.1:{unused_port}", tries=2, pause=0.01)


def test_the_crowd_refuses_a_speed_other_than_the_marketplaces(tmp_path, fast_market, capsys):
    from campaign.cli import main

    _spec(tmp_path, fast_market.endpoint_url)
    code = main(["crowd", "run", "--config", str(tmp_path / "campaigns.yaml"), "--endpoint", fast_market.endpoint_url,
                 "--market-state", str(tmp_path / "market"), "--speed", "3600"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--speed 3600, but the marketplace" in err and "runs at speed 600" in err


def test_a_run_refused_for_an_unreadable_clock_writes_nothing(tmp_path, unused_port, monkeypatch, capsys):
    from campaign.cli import main

    monkeypatch.setattr("campaign.marketplaces.remote_clock.PAUSE", 0.01)
    _spec(tmp_path, f"http://127.0.0.1:{unused_port}")
    code = main(["run", "--config", str(tmp_path / "campaigns.yaml"), "--state", str(tmp_path / "state"), "--quiet"])
    assert code == 2
    assert f"127.0.0.1:{unused_port}/clock did not answer" in capsys.readouterr().err
    assert not (tmp_path / "state" / "campaign.db").exists()
