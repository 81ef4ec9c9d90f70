"""The benchmark's quick run works end to end and reports the promised shape."""

from __future__ import annotations

import json

import pytest

from campaign.bench import market as bench


@pytest.mark.slow
def test_quick_bench_json_shape(capsys):
    assert bench.main(["--quick", "--json", "--client", "boto3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["client"] == "boto3"
    assert out["hits"] == 50 and out["assignments"] == 250
    assert [p["phase"] for p in out["phases"]] == ["post", "work", "collect", "approve", "post-open", "workers"]
    assert out["open_hits"] == 300 and out["crowd"] == 20
    crowd = out["phases"][-1]
    assert 100 <= crowd["requests"] <= 200  # 100 rounds of list (+ accept when the list is not empty)
    assert all(p["rps"] > 0 and p["p99_ms"] >= p["p50_ms"] for p in out["phases"])
    assert out["server_peak_rss_mib"] is None or out["server_peak_rss_mib"] > 1


@pytest.mark.slow
def test_quick_bench_with_the_light_signed_client(capsys):
    assert bench.main(["--quick", "--json", "--client", "sigv4", "--processes", "3", "--threads", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["client"] == "sigv4" and out["processes"] == 3 and out["assignments"] == 250
    assert [p["phase"] for p in out["phases"]] == ["post", "work", "collect", "approve", "post-open", "workers"]
    assert out["phases"][2]["requests"] == 100  # 50 HITs x (a page of 5 with a token, then an empty page)
