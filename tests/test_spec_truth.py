"""A simulated crowd answers from each item's hidden truth: a spec without `truth:` is refused (it used to
run and score noise), and `truth: none` runs on noise on purpose, with a warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.commands import main
from campaign.spec import SpecError, load_spec

ROOT = Path(__file__).resolve().parent.parent

SPEC = """\
campaigns:
  - name: c
    topic: t
    input:
      propositions: {items}
    task: {{kind: likert}}
    budget: "10.00"
    crowd:
      kind: simulated
      workers: 10
{truth}"""


def _write(tmp_path: Path, truth: str) -> Path:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(items=ROOT / "examples" / "ukpconvarg1-water" / "propositions.tsv", truth=truth))
    return spec


def test_simulated_crowd_without_truth_is_refused(tmp_path, capsys):
    spec = _write(tmp_path, "")
    with pytest.raises(SpecError) as exc:
        load_spec(spec)
    assert any("campaigns[0].crowd: a simulated crowd answers from each item's hidden truth" in p for p in exc.value.problems)
    assert main(["validate", str(spec)]) == 2
    assert "truth: none" in capsys.readouterr().err


def test_truth_none_runs_on_noise_with_a_warning(tmp_path, capsys):
    spec = _write(tmp_path, "      truth: none\n")
    loaded = load_spec(spec)
    assert loaded.campaigns[0].crowd.truth is None
    assert len(loaded.warnings) == 1 and "campaigns[0].crowd.truth: none: " in loaded.warnings[0]
    assert main(["validate", str(spec)]) == 0
    captured = capsys.readouterr()
    assert "warning: " in captured.err and "every answer is noise" in captured.err
    assert captured.out.rstrip().endswith("ok")


def test_a_truth_file_is_read_and_no_warning(tmp_path):
    spec = _write(tmp_path, f"      truth: {ROOT / 'examples' / 'ukpconvarg1-water' / 'truth.tsv'}\n")
    loaded = load_spec(spec)
    assert loaded.campaigns[0].crowd.truth and loaded.warnings == ()


def test_real_people_need_no_truth(tmp_path):
    spec = _write(tmp_path, "")
    spec.write_text(spec.read_text().replace("kind: simulated", "kind: none"))
    assert load_spec(spec).warnings == ()
