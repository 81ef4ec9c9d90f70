"""`campaign bench scale` end to end at a small size: the real `campaign run` (its crowd in a child
process) and every key of the JSON contract, with figures that could be wrong."""

from __future__ import annotations

import json

from campaign.bench.scale import main, run_scale

KEYS = {"propositions", "hits", "assignments", "seconds", "peak_rss_mib", "requests", "store_mib", "market_mib",
        "tick_ms", "auto_approved_before_review"}


def test_a_small_scale_run_reports_every_figure(tmp_path):
    out = run_scale(50, seed=1, keep=tmp_path / "kept")
    assert set(out) == KEYS
    assert (out["propositions"], out["hits"], out["assignments"]) == (50, 10, 50)  # 5 per HIT, 5 workers each
    assert out["auto_approved_before_review"] == 0
    assert out["requests"] >= out["hits"] + out["assignments"]  # a post per HIT, a decision per assignment at least
    assert out["seconds"] > 0 and out["peak_rss_mib"] > 50 and out["store_mib"] > 0 and out["market_mib"] > 0
    assert 0 < out["tick_ms"]["p50"] <= out["tick_ms"]["p99"]
    stats = json.loads((tmp_path / "kept" / "state" / "run-stats.json").read_text())
    assert sum(len(v) for v in stats["tick_ms"].values()) >= 1


def test_json_flag_prints_the_contract(capsys, monkeypatch):
    fake = dict.fromkeys(KEYS, 0) | {"tick_ms": {"p50": 1.0, "p99": 2.0}}
    monkeypatch.setattr("campaign.bench.scale.run_scale", lambda *a, **k: fake)
    assert main(["--propositions", "10", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == fake
