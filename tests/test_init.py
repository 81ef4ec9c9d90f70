"""`campaign init [DIR]`: the starter spec validates and runs, and nothing is ever overwritten."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.init import files
from campaign.spec import load_spec
from tests.support.cli import cli, run_campaign


def test_init_writes_a_spec_that_validates(tmp_path, capsys):
    folder = tmp_path / "new"
    assert cli("init", str(folder)) == 0
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == sorted(files())
    assert cli("validate", str(folder / "campaigns.yaml")) == 0
    assert capsys.readouterr().out.rstrip().endswith("ok")
    spec = (folder / "campaigns.yaml").read_text(encoding="utf-8")
    assert spec.count("#") > 20  # commented, line by line


def _init_with_nuggets(folder: Path) -> Path:
    """`campaign init FOLDER`, then its commented nugget campaign uncommented; the spec file."""
    assert cli("init", folder) == 0
    spec = folder / "campaigns.yaml"
    lines = spec.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  # - name: my-first-nuggets"))
    spec.write_text("\n".join(lines[:start] + [line.replace("  # ", "  ", 1) for line in lines[start:]]) + "\n",
                    encoding="utf-8")
    return spec


def test_the_commented_nugget_campaign_validates_once_uncommented(tmp_path):
    spec = _init_with_nuggets(tmp_path)
    nuggets = load_spec(spec).campaign("my-first-nuggets")
    assert nuggets.stages[0].kind == "nuggets" and nuggets.input_kind == "documents"
    from campaign.inputs import load_documents, load_truth

    keys = [i.key for i in load_documents(tmp_path / "documents")]
    assert keys and set(keys) == set(load_truth(tmp_path / "documents-truth.tsv"))


def test_init_never_overwrites(tmp_path, capsys):
    (tmp_path / "truth.tsv").write_text("mine\n", encoding="utf-8")
    assert cli("init", str(tmp_path)) == 2
    err = capsys.readouterr().err
    assert "not overwriting" in err and str(tmp_path / "truth.tsv") in err and "nothing was written" in err
    assert (tmp_path / "truth.tsv").read_text(encoding="utf-8") == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["truth.tsv"]  # nothing else written either


def test_init_into_a_file_says_it_is_a_file(tmp_path, capsys):
    """Before: 'not overwriting [Errno 17] File exists: ...', the error's own text in the middle of ours."""
    (tmp_path / "notes").write_text("mine\n", encoding="utf-8")
    assert cli("init", str(tmp_path / "notes")) == 2
    assert capsys.readouterr().err.strip() == (f"campaign init: {tmp_path / 'notes'} is a file, not a folder; nothing was "
                                               "written (choose another DIR)")
    assert (tmp_path / "notes").read_text(encoding="utf-8") == "mine\n"


@pytest.mark.slow
def test_the_starter_campaign_runs_to_the_end(tmp_path):
    run_campaign("init", "starter", cwd=tmp_path, check=True)
    proc = run_campaign("run", "--quiet", "--state", tmp_path / "state", cwd=tmp_path / "starter", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    scores = (tmp_path / "state" / "my-first-campaign" / "scores.csv").read_text(encoding="utf-8").splitlines()
    assert len(scores) == 1 + 10  # a header and every proposition scored


@pytest.mark.slow
def test_the_commented_nugget_campaign_runs_once_uncommented(tmp_path):
    _init_with_nuggets(tmp_path)
    proc = run_campaign("run", "--quiet", "--campaign", "my-first-nuggets", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "state" / "my-first-nuggets" / "gold_nuggets.jsonl").read_text(encoding="utf-8").strip()
