"""`campaign simulate`: percentiles and reliability measures, the twin of a real-people spec, and a whole
simulation whose spend is exactly what `campaign run` of the same seed spends, with no state left."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path

import pytest

from campaign.simulate import as_simulation, pearson, percentiles, top_k_overlap
from campaign.spec import load_spec
from tests.support.cli import cli_output, run_args, run_campaign
from tests.support.specs import NO_CROWD, campaign, simulated, write_spec


def test_percentiles_interpolate_between_the_ordered_runs() -> None:
    assert percentiles([3.0, 1.0, 2.0]) == {"median": 2.0, "p10": 1.2, "p90": 2.8}
    assert percentiles([5.0]) == {"median": 5.0, "p10": 5.0, "p90": 5.0}


def test_reliability_measures() -> None:
    truth = {f"i{k}": k / 20 for k in range(20)}
    assert pearson(dict(truth), truth) == pytest.approx(1.0)
    assert pearson({"i1": 1.0, "i2": 1.0, "i3": 1.0}, truth) is None  # a constant score says nothing
    reverse = {k: -v for k, v in truth.items()}
    assert top_k_overlap(dict(truth), truth) == 1.0 and top_k_overlap(reverse, truth) == 0.0
    assert top_k_overlap({"i1": 1.0}, truth) is None  # fewer scored items than k


def test_a_spec_for_real_people_is_simulated_on_the_twin_marketplace_with_a_random_truth(tmp_path: Path) -> None:
    config = write_spec(tmp_path / "c.yaml", campaign("real", task={"kind": "likert", "reward": "0.10"}, budget="20.00",
                                                      crowd=NO_CROWD, marketplace="mturk-sandbox"))
    c = load_spec(config).campaigns[0]
    sim = as_simulation(c, tmp_path, adversaries=0.2, seed=4)
    assert (sim.marketplace, sim.crowd.kind, sim.crowd.adversaries.share) == ("local", "simulated", 0.2)
    assert sim.stages == c.stages and sim.budget == c.budget  # the spec's own rewards and budget
    rows = Path(str(sim.crowd.truth)).read_text().splitlines()
    assert rows[0] == "id\timportance" and len(rows) == 61  # every item of the input, a value each
    again = as_simulation(c, tmp_path, adversaries=None, seed=4)
    assert Path(str(again.crowd.truth)).read_text() == "\n".join(rows) + "\n"  # the truth is the seed's


@pytest.mark.slow
def test_simulate_spends_what_a_run_of_the_same_seed_spends_and_leaves_no_state(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from campaign.cli import main

    config = write_spec(tmp_path / "c.yaml", campaign("sim", task={"kind": "likert", "reward": "0.06"}, budget="10.00",
                                                      crowd=simulated(20, speed=3600, arrival_span="30m")))
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    out_file = tmp_path / "out.json"
    with open(out_file, "w", encoding="utf-8") as out, pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.stdout", out)
        assert main(["simulate", "--config", str(config), "--runs", "2", "--seed", "7", "--jobs", "1", "--json"]) == 0
    data = json.loads(out_file.read_text(), parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert list(work.iterdir()) == []  # nothing written where it ran: no state folder
    assert data["runs"] == 2 and data["seeds"] == [7, 8]
    total = data["campaigns"]["sim"]["total"]
    assert set(total) >= {"spend", "hours", "workers", "answers_excluded", "reliability"}
    assert total["reliability"]["median"] > 0.5  # the scores recover the simulated truth
    assert data["campaigns"]["sim"]["stages"]["likert"]["spend"] == total["spend"]  # one stage: all of it
    spends = []
    for seed in (7, 8):
        proc = run_campaign(*run_args(config, tmp_path / f"state{seed}", seed=seed), timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        status = cli_output("status", "--json", "--state", tmp_path / f"state{seed}")  # in this process: no daemon
        assert status.returncode == 0, status.stderr
        spends.append(Decimal(str(json.loads(status.stdout)["campaigns"][0]["money"]["spent"])))
    low, high = sorted(spends)
    assert math.isclose(float(total["spend"]["p10"]), float(low + (high - low) * Decimal("0.1")), abs_tol=0.006)
    assert math.isclose(float(total["spend"]["median"]), float((low + high) / 2), abs_tol=0.006)


def _children(pid: int) -> set[int]:
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc (Linux)")
def test_a_stopped_simulation_leaves_no_worker_running(tmp_path: Path) -> None:
    """SIGTERM to `campaign simulate` (as `timeout` sends): its pool's workers went on with their runs,
    orphaned, at full CPU. They die with it now."""
    import os
    import signal
    import subprocess
    import time

    from tests.support.cli import campaign_cmd, clean_env

    config = write_spec(tmp_path / "c.yaml", campaign("sim", task={"kind": "likert", "reward": "0.06"}, budget="10.00",
                                                      crowd=simulated(20, speed=3600, arrival_span="30m")))
    proc = subprocess.Popen(campaign_cmd("simulate", "--config", config, "--runs", "40", "--jobs", "2"), cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=clean_env())
    try:
        deadline = time.monotonic() + 60
        workers: set[int] = set()
        while len(workers) < 2 and time.monotonic() < deadline:  # the pool's two workers (and its resource tracker)
            time.sleep(0.2)
            workers = {p for p in _children(proc.pid) if "spawn_main" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")}
        assert len(workers) == 2, "the pool's workers never started"
        time.sleep(1.0)  # at work on their runs
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in workers):
            time.sleep(0.2)
        left = [p for p in workers if Path(f"/proc/{p}").exists()]
        assert not left, f"workers {left} outlived `campaign simulate`"
    finally:
        for p in [proc.pid, *workers]:
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def test_the_total_of_a_two_stage_campaign_is_its_final_order_over_every_item() -> None:
    """Before: Pearson over the kept items' scores alone (15 of a two-stage demo's 60), so narrow a range that
    the total read 0.47-0.90 while both stages were sound. A ranking export scores only its candidates and
    lists the rest after them: the total is now Spearman of that order over every item."""
    from campaign.simulate import _total_reliability

    truth = {f"i{k}": float(k) for k in range(20)}
    best_first = [(f"i{k}", float(k) if k >= 15 else None) for k in range(19, -1, -1)]
    said = _total_reliability(best_first, truth)
    assert said == {"reliability": pytest.approx(1.0), "reliability_kind": "spearman, final order"}
    said = _total_reliability([(f"i{k}", float(k)) for k in range(20)], truth)  # every item scored: Pearson
    assert said == {"reliability": pytest.approx(1.0), "reliability_kind": "pearson"}
    # the candidates in the right order but the rest reversed: the order says so, the candidates alone would not
    mixed = best_first[:5] + best_first[5:][::-1]
    assert _total_reliability(mixed, truth)["reliability"] < 0.5
