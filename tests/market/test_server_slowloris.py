"""The marketplace keeps answering other clients while 1,100 sockets trickle their header sections, in a
server process whose file limit (`ulimit -n 1024`) is below the number of attacking sockets."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from campaign.bench.slowloris import Trickle, probe
from campaign.credentials import read_credentials_file
from tests.support.cli import clean_env, start_campaign

SERVER = os.environ.get("CAMPAIGN_SLOWLORIS_SERVER", "campaign.market.server")  # the legacy one, to see it fail


def _limit_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


def _serve(state: Path) -> tuple[subprocess.Popen, str]:
    args = ["--port", "0", "--state", str(state)]
    popen = {"stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL, "text": True, "preexec_fn": _limit_files}
    if SERVER == "campaign.market.server":
        proc = start_campaign("market", "serve", *args, **popen)
    else:
        proc = subprocess.Popen([sys.executable, "-m", SERVER, *args], env=clean_env(), **popen)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    return proc, url


@pytest.mark.slow
@pytest.mark.serial
def test_health_and_signed_calls_answer_through_1100_trickling_sockets(tmp_path):
    proc, url = _serve(tmp_path / "m")
    trickle: Trickle | None = None
    try:
        creds = read_credentials_file(tmp_path / "m" / "credentials", "default")
        assert probe(url, creds, seconds=0.1).summary()["balance"]["answered"] == 1
        port = int(url.rsplit(":", 1)[1])
        trickle = Trickle("127.0.0.1", port, 1100, interval=8.0).start()
        time.sleep(2.0)  # every socket connected and the first bytes on their way
        # 24 s: past the server's header deadline (10 s), so sockets are cut, come back and are cut again
        result = probe(url, creds, seconds=24.0, every=0.5, timeout=5.0)
    finally:
        if trickle is not None:
            trickle.stop()
        proc.terminate()
        proc.wait(timeout=15)
    s = result.summary()
    assert trickle is not None and trickle.opened >= 1100
    assert s["health"]["probes"] >= 5, s  # each probe waits at most 5 s for each of its two answers
    assert s["health"]["answered"] == s["health"]["probes"], s
    assert s["balance"]["answered"] == s["balance"]["probes"], s
