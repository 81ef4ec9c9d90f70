"""`campaign bench scale` end to end at a small size: the real `campaign run` (its crowd in a child
process) and every key of the JSON contract, with figures that could be wrong."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from campaign.bench.scale import TreeMemory, main, prepare, run_scale

KEYS = {"propositions", "hits", "assignments", "seconds", "peak_rss_mib", "requests", "store_mib", "market_mib",
        "tick_ms", "auto_approved_before_review", "unfilled_slots", "step_ms"}


@pytest.mark.slow
def test_a_small_scale_run_reports_every_figure(tmp_path):
    out = run_scale(50, seed=1, keep=tmp_path / "kept")
    assert set(out) == KEYS
    assert (out["propositions"], out["hits"], out["assignments"]) == (50, 10, 50)  # 5 per HIT, 5 workers each
    assert out["auto_approved_before_review"] == 0 and out["unfilled_slots"] == 0
    assert out["requests"] >= out["hits"] + out["assignments"]  # a post per HIT, a decision per assignment at least
    assert out["seconds"] > 0 and out["peak_rss_mib"] > 50 and out["store_mib"] > 0 and out["market_mib"] > 0
    assert 0 < out["tick_ms"]["p50"] <= out["tick_ms"]["p99"]
    stats = json.loads((tmp_path / "kept" / "state" / "run-stats.json").read_text())
    assert sum(len(v) for v in stats["tick_ms"].values()) >= 1
    steps = out["step_ms"]
    assert {"collect", "review", "post", "quality"} <= set(steps)
    # every pass runs its steps one after another: the steps' time is within the passes' time
    assert sum(f["total_s"] for f in steps.values()) <= sum(sum(v) for v in stats["tick_ms"].values()) / 1000 + 0.05
    assert list(steps) == sorted(steps, key=lambda s: (-steps[s]["total_s"], s))


def test_a_relative_keep_folder_gives_a_spec_that_finds_its_inputs(tmp_path, monkeypatch):
    """Before: `--keep sc` wrote `propositions: sc/props.tsv` into sc/scale.yaml, which reads it relative to
    its own folder (sc/sc/props.tsv), and the run refused the spec."""
    from campaign.spec import load_spec

    monkeypatch.chdir(tmp_path)
    spec = prepare(Path("sc"), 20, 0)
    c = load_spec(spec).campaigns[0]
    assert Path(c.input_path).is_file() and Path(str(c.crowd.truth)).is_file()


def test_json_flag_prints_the_contract(capsys, monkeypatch):
    fake = dict.fromkeys(KEYS, 0) | {"tick_ms": {"p50": 1.0, "p99": 2.0}, "step_ms": {"collect": {"p50": 1.0, "p99": 2.0, "total_s": 3.0}}}
    monkeypatch.setattr("campaign.bench.scale.run_scale", lambda *a, **k: fake)
    assert main(["--propositions", "10", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == fake


def test_the_text_report_names_the_slowest_steps(capsys, monkeypatch):
    fake = dict.fromkeys(KEYS, 0) | {"tick_ms": {"p50": 1.0, "p99": 2.0},
                                     "step_ms": {"collect": {"p50": 1.0, "p99": 2.0, "total_s": 3.0},
                                                 "review": {"p50": 0.5, "p99": 1.5, "total_s": 2.0}}}
    monkeypatch.setattr("campaign.bench.scale.run_scale", lambda *a, **k: fake)
    assert main(["--propositions", "10"]) == 0
    out = capsys.readouterr().out
    assert "collect    p50 1.0 ms, p99 2.0 ms, 3.0 s in all" in out
    assert out.index("collect") < out.index("review")


def test_tree_memory_adds_up_the_processes_a_run_starts():
    """The daemon starts its marketplace and its crowd as child processes: memory they hold counts."""
    grandchild = "import time; b = bytearray(80 * 2**20); b[::4096] = b'x' * len(b[::4096]); print('ok', flush=True); time.sleep(30)"
    parent = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {grandchild!r}]); p.wait()"],
                              start_new_session=True)
    try:
        watch = TreeMemory(parent.pid, every=0.05)
        deadline = time.monotonic() + 20
        while watch.peak_kib < 80 * 1024 and time.monotonic() < deadline:
            time.sleep(0.1)
        watch.stop()
        assert watch.peak_kib >= 80 * 1024  # the grandchild's 80 MiB, seen from the parent's pid
    finally:
        os.killpg(parent.pid, signal.SIGKILL)  # the grandchild too
        parent.wait()
