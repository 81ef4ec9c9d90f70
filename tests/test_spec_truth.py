"""A simulated crowd answers from each item's hidden truth: a spec without `truth:` is refused (it used to
run and score noise), and `truth: none` runs on noise on purpose, with a warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.spec import SpecError, load_spec
from tests.support.cli import cli
from tests.support.paths import WATER
from tests.support.specs import campaign, simulated, write_spec


def _write(tmp_path: Path, truth: Path | str | None, kind: str = "simulated") -> Path:
    """A Likert campaign over the demo's propositions whose crowd of 10 has `truth` (None: no `truth:`)."""
    crowd = simulated(10, truth=truth) | {"kind": kind}
    return write_spec(tmp_path / "spec.yaml", campaign("c", topic="t", task={"kind": "likert"}, budget="10.00", crowd=crowd,
                                                       poll_interval=None))


def test_simulated_crowd_without_truth_is_refused(tmp_path, capsys):
    spec = _write(tmp_path, None)
    with pytest.raises(SpecError) as exc:
        load_spec(spec)
    assert any("campaigns[0].crowd: a simulated crowd answers from each item's hidden truth" in p for p in exc.value.problems)
    assert cli("validate", str(spec)) == 2
    assert "truth: none" in capsys.readouterr().err


def test_truth_none_runs_on_noise_with_a_warning(tmp_path, capsys):
    spec = _write(tmp_path, "none")
    loaded = load_spec(spec)
    assert loaded.campaigns[0].crowd.truth is None
    assert len(loaded.warnings) == 1 and "campaigns[0].crowd.truth: none: " in loaded.warnings[0]
    assert cli("validate", str(spec)) == 0
    captured = capsys.readouterr()
    assert "warning: " in captured.err and "every answer is noise" in captured.err
    assert captured.out.rstrip().endswith("ok")


def test_a_truth_file_is_read_and_no_warning(tmp_path):
    spec = _write(tmp_path, WATER / "truth.tsv")
    loaded = load_spec(spec)
    assert loaded.campaigns[0].crowd.truth and loaded.warnings == ()


def test_real_people_need_no_truth(tmp_path):
    spec = _write(tmp_path, None, kind="none")
    assert load_spec(spec).warnings == ()
