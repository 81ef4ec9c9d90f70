"""The command line's numbers (`campaign.argtypes`): every option refuses what the code behind it
cannot take, with its name and a reason, before anything is started or written."""

from __future__ import annotations

import pytest

from campaign import argtypes
from tests.support.cli import cli_output

# (command, option, a value the option must refuse, what the refusal says)
REFUSED = [
    # a negative seed was stored with the campaigns and failed their finish step every pass, for good
    (("run", "--config", "x.yaml"), "--seed", "-1", "a seed is from 0"),
    (("simulate", "--config", "x.yaml"), "--seed", "-1", "a seed is from 0"),
    (("preview", "--config", "x.yaml", "--out", "o"), "--seed", "9223372036854775808", "a seed is from 0"),
    (("aggregate", "labels.tsv"), "--seed", "seven", "a seed is a whole number"),
    (("crowd", "run", "--config", "x.yaml"), "--seed", "-1", "a seed is from 0"),
    (("market", "serve"), "--seed", "-1", "a seed is from 0"),
    (("bench", "hostile"), "--seeds", "1,-2", "a seed is from 0"),
    (("bench", "prolific"), "--seeds", "1,a", "a seed is a whole number"),
    (("bench", "hostile"), "--seeds", ",", "give at least one seed"),
    # ports were an OverflowError from bind(), `run`'s after its state folder was made
    (("run", "--config", "x.yaml"), "--market-port", "70000", "a port is from 0 to 65535"),
    (("preview", "--config", "x.yaml", "--out", "o", "--serve"), "--port", "-1", "a port is from 0 to 65535"),
    (("prolific", "serve"), "--port", "65536", "a port is from 0 to 65535"),
    (("market", "serve"), "--content-port", "-5", "a port is from 0 to 65535"),
    # counts: a negative --limit was no limit on SQLite and an error on PostgreSQL
    (("events", "x"), "--limit", "-5", "must be 1 or more"),
    (("simulate", "--config", "x.yaml"), "--jobs", "0", "must be 1 or more"),
    (("bench", "hostile"), "--jobs", "-3", "must be 1 or more"),
    (("prolific", "serve"), "--balance", "-100", "must be 0 or more"),
    (("market", "worker", "add", "AXYZ"), "--approval", "500", "a percentage is from 0 to 100"),
    (("market", "worker", "add", "AXYZ"), "--approved", "-5", "must be 0 or more"),
]


@pytest.mark.parametrize(("command", "option", "value", "says"), REFUSED, ids=lambda x: str(x).replace(" ", ""))
def test_every_number_option_refuses_what_its_code_cannot_take(tmp_path, command, option, value, says):
    p = cli_output(*command, option, value, cwd=tmp_path)
    assert p.returncode == 2, (command, option, value, p.stdout[-300:], p.stderr[-300:])
    assert f"argument {option}: {says}" in p.stderr and "Traceback" not in p.stderr
    assert list(tmp_path.iterdir()) == []  # nothing made


def test_the_types_take_their_whole_range():
    assert argtypes.seed("0") == 0 and argtypes.seed(str(argtypes.MAX_SEED)) == argtypes.MAX_SEED
    assert argtypes.seeds("1, 2,3") == [1, 2, 3]
    assert (argtypes.port("0"), argtypes.port("65535")) == (0, 65535)
    assert (argtypes.count("0"), argtypes.positive("1"), argtypes.percent("100")) == (0, 1, 100)
