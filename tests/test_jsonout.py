"""Every `--json` output is strict JSON (RFC 8259: no NaN, no Infinity), which `jq` and JavaScript's
`JSON.parse` read: the helper, and each command that has `--json`, run and parsed refusing NaN.

The commands are enumerated from the source (every `add_argument("--json"`), so a new `--json` option
without a run here fails `test_every_json_option_is_run_here`."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from campaign.jsonout import dumps, finite
from campaign.paths import shared_data_dir
from tests.support.cli import cli
from tests.support.paths import ROOT


def refuse(name: str) -> None:
    raise ValueError(f"not JSON: {name}")


def strict(text: str) -> object:
    return json.loads(text, parse_constant=refuse)


def test_dumps_writes_null_for_nan_and_infinity():
    obj = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": np.float64("nan"), "d": np.arange(2), "e": (np.int64(3),)}
    assert strict(dumps(obj)) == {"a": None, "b": [None, None, 1.5], "c": None, "d": [0, 1], "e": [3]}
    with pytest.raises(ValueError):
        strict(json.dumps({"a": math.nan}))  # the parser used below does refuse what json.dumps wrote
    assert finite({"k": "NaN"}) == {"k": "NaN"}  # a string is not a number


# ---- the commands --------------------------------------------------------------------------------
def labels_file(tmp_path: Path) -> Path:
    """Two labels per item: nothing can be held back, so `auto`'s held-out scores are null (NaN before)."""
    f = tmp_path / "labels.tsv"
    f.write_text("item\tworker\tlabel\n" + "".join(f"i{i}\tw{(i + k) % 5}\t{'ab'[(i * k) % 2]}\n" for i in range(12) for k in range(2)),
                 encoding="utf-8")
    return f


def store_with_nan(tmp_path: Path) -> Path:
    """A campaign whose worker evidence and event data hold NaN (as a float computed on no data is stored)."""
    from campaign.store import CampaignRow, EventRow, Store, WorkerRow

    store = Store.open(tmp_path)
    with store.session() as s:
        s.add(CampaignRow(name="c1", fingerprint="f", spec_json="{}", budget="5.00"))
        s.add(WorkerRow(campaign="c1", worker_id="W0", evidence=json.dumps({"correlation": math.nan, "labels": 1})))
        s.add(EventRow(campaign="c1", kind="quality", message="m", data=json.dumps({"r": math.nan})))
    store.close()
    return tmp_path


def evaluate_inputs(tmp_path: Path) -> dict[str, list[str]]:
    def w(name: str, text: str) -> str:
        (tmp_path / name).write_text(text, encoding="utf-8")
        return str(tmp_path / name)

    gold = w("gold.tsv", "sentence\trank\tsets\n1\tA\ts1 s10,s11\n2\tB\ts3,s4,s5\n")
    nuggets = w("gold_nuggets.jsonl", json.dumps({"hit": "h", "item": "a.s0", "first": 0, "last": 3, "workers": 3,
                                                   "mace_weight": 1.2, "text": "plastic bottles leak chemicals"}) + "\n")
    return {
        "extract": ["evaluate", "extract", "--gold", gold, "--system", w("sys.txt", "s10\ns4\n"), "--json"],
        "nuggets": ["evaluate", "nuggets", "--gold", nuggets, "--system", w("s.txt", "Plastic bottles leak chemicals.\n"), "--json"],
        "clusters": ["evaluate", "clusters", "--gold", w("g.tsv", "item\tcluster\na\t1\nb\t1\n"),
                     "--pred", w("p.tsv", "item\tcluster\na\tx\nb\tx\n"), "--json"],  # one cluster each: 0/0 entropies
        "hierarchy": ["evaluate", "hierarchy", "--gold", w("h1.tsv", "node\tparent\tnuggets\n1\t\tA\n"),
                      "--pred", w("h2.tsv", "node\tparent\tnuggets\nr\t\tA\n"), "--json", "--per-nugget"],
    }


def fast_runs(tmp_path: Path) -> dict[str, list[list[str]]]:
    """Per source file with `--json` options: the runs that cover them (cheap ones)."""
    labels = str(labels_file(tmp_path))
    state = str(store_with_nan(tmp_path / "state"))
    return {
        "campaign/aggregate/cli.py": [["aggregate", labels, "--method", m, "--json"] for m in ("auto", "majority", "mace", "ds")],
        "campaign/evaluate/cli.py": list(evaluate_inputs(tmp_path).values()),
        "campaign/commands.py": [["status", "--json", "--state", state], ["workers", "c1", "--json", "--state", state],
                                 ["events", "c1", "--json", "--state", state]],
        "campaign/market/server.py": [["market", "worker", "add", "AJSON1", "--state", str(tmp_path / "market"), "--json"]],
        "campaign/held_cli.py": [["held", "--json", "--state", state], ["held", "c1", "--all", "--json", "--state", state]],
    }


#: `campaign bench NAME` with its lightest options; each runs a benchmark, so the test is slow.
BENCH_RUNS: dict[str, list[str]] = {
    "aggregation": ["--draws", "1", "--condition", "three_labels"],
    "scale": ["--propositions", "10"],
    "market": ["--quick", "--client", "boto3"],
    "mace": ["--no-ukp"],
    "prior": ["--draws", "1"],
    "hostile": ["--config", str(ROOT / "examples" / "hostile.yaml"), "--seeds", "1", "--campaign", "water-bottles"],
    "prolific": ["--config", str(ROOT / "examples" / "prolific.yaml"), "--seeds", "1"],
}
NEEDS_SHARED_DATA = {"mace", "prior"}


def json_option_files() -> dict[str, int]:
    out = {}
    for path in sorted((ROOT / "campaign").rglob("*.py")):
        n = len(re.findall(r"add_argument\(\s*\"--json\"", path.read_text(encoding="utf-8")))
        if n:
            out[str(path.relative_to(ROOT))] = n
    return out


def test_every_json_option_is_run_here(tmp_path):
    files = json_option_files()
    # run and parsed strictly where their own tests already run them, not a second time here
    elsewhere = {"campaign/simulate_cli.py": "tests/test_simulate.py", "campaign/bench/nuggets.py": "tests/datasets/test_hiersumm.py",
                 "campaign/bench/ranking.py": "tests/bench/test_bench_ranking.py",
                 "campaign/bench/dashboard.py": "tests/dashboard/test_bench_dashboard.py",
                 "campaign/bench/quality.py": "tests/bench/test_bench_quality.py"}
    for tests in elsewhere.values():
        assert "strict(" in (ROOT / tests).read_text(encoding="utf-8") or "parse_constant" in (ROOT / tests).read_text(encoding="utf-8"), tests
    covered = set(fast_runs(tmp_path)) | {f"campaign/bench/{b}.py" for b in BENCH_RUNS} | set(elsewhere)
    assert set(files) == covered, "a command with --json is not run by this test (or a listed one lost --json)"
    assert files["campaign/commands.py"] == 3 and files["campaign/evaluate/cli.py"] == 4


def run_strict(capsys, argv: list[str]) -> object:
    code = cli(*argv)
    out = capsys.readouterr().out
    assert code == 0, argv
    return strict(out)


def test_fast_json_outputs_are_strict(tmp_path, capsys):
    for runs in fast_runs(tmp_path).values():
        for argv in runs:
            run_strict(capsys, argv)


def test_aggregate_says_why_a_figure_is_null(tmp_path, capsys):
    out = run_strict(capsys, ["aggregate", str(labels_file(tmp_path)), "--json"])
    assert isinstance(out, dict)
    ev = out["evidence"]
    assert ev["majority"]["heldout_log_prob"] is None and "held back" in ev["majority"]["heldout_log_prob_null_because"]
    assert ev["ds"]["gain_over_majority"] is None and ev["ds"]["null_because"]
    assert out["method"] == "majority" and "held back" in ev["reason"]


def test_stored_nan_comes_out_as_null(tmp_path, capsys):
    state = str(store_with_nan(tmp_path))
    (w,) = run_strict(capsys, ["workers", "c1", "--json", "--state", state])  # type: ignore[misc]
    assert w["evidence"]["correlation"] is None and w["evidence"]["labels"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("bench", sorted(BENCH_RUNS))
def test_bench_json_outputs_are_strict(bench, capsys, monkeypatch, tmp_path):
    if bench in NEEDS_SHARED_DATA and shared_data_dir() is None:
        pytest.skip("needs ../shared/data (real crowd data), absent on a fresh clone")
    monkeypatch.chdir(tmp_path)
    run_strict(capsys, ["bench", bench, *BENCH_RUNS[bench], "--json"])
