"""A simulated run on virtual time depends on its seed alone: the two-stage example gives the same
scores byte for byte on a quiet machine and with four busy processes beside it (README: "Same seed,
same scores")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import run_args, run_campaign
from tests.support.paths import ROOT

BUSY = "while True: pass"


def _scores(state: Path) -> dict[str, bytes]:
    return {str(f.relative_to(state)): f.read_bytes() for f in sorted(state.glob("*/scores.*"))}


@pytest.mark.slow
@pytest.mark.serial  # its four busy processes would slow every test running beside it: alone, after the rest
def test_the_two_stage_example_gives_the_same_scores_on_a_quiet_and_a_loaded_machine(tmp_path: Path) -> None:
    config = ROOT / "examples" / "two-stage.yaml"
    quiet = run_campaign(*run_args(config, tmp_path / "quiet", seed=3), timeout=300)
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(4)]
    try:
        loaded = run_campaign(*run_args(config, tmp_path / "loaded", seed=3), timeout=300)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    first, second = _scores(tmp_path / "quiet"), _scores(tmp_path / "loaded")
    assert first and set(first) == set(second)
    for name in first:
        assert first[name] == second[name], f"{name} differs between the quiet and the loaded run"
