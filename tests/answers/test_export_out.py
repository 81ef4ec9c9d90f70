"""`campaign export --out` and `campaign report --out`: an unwritable target is one clear line and exit
2, never a traceback or a "written" that was not; a device is written to, never replaced."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.answers.test_forget_store import build
from tests.support.cli import cli

FULL = Path("/dev/full")


@pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("command", [("export", "one"), ("export", "one", "--answers"), ("report", "one")])
def test_a_full_disk_is_an_error_not_a_success(tmp_path, capsys, command):
    state = tmp_path / "state"
    build(state)
    assert cli(*command, "--state", str(state), "--out", str(FULL)) == 2
    captured = capsys.readouterr()
    assert f"campaign {command[0]}: cannot write /dev/full: No space left on device" in captured.err
    assert "written" not in captured.out + captured.err
    assert FULL.is_char_device()  # before: `export --answers` renamed a regular file over /dev/full


@pytest.mark.parametrize("command", [("export", "one"), ("export", "one", "--answers")])
def test_a_missing_folder_is_an_error(tmp_path, capsys, command):
    state = tmp_path / "state"
    build(state)
    assert cli(*command, "--state", str(state), "--out", str(tmp_path / "no" / "x.csv")) == 2
    assert "No such file or directory" in capsys.readouterr().err


def test_an_export_replaces_an_earlier_one_whole(tmp_path, capsys):
    state = tmp_path / "state"
    build(state)
    out = tmp_path / "answers.tsv"
    out.write_text("an earlier export\n")
    assert cli("export", "one", "--answers", "--state", str(state), "--out", str(out)) == 0
    text = out.read_text()
    assert "an earlier export" not in text and text.count("\n") == 4  # a header and three answers
    assert sorted(p.name for p in tmp_path.iterdir()) == ["answers.tsv", "state"]


@pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full (Linux)")
def test_standard_output_on_a_full_disk_is_one_line_not_a_traceback(tmp_path):
    import subprocess

    from tests.support.cli import campaign_cmd, clean_env

    state = tmp_path / "state"
    build(state)
    with open(FULL, "w") as full:
        p = subprocess.run(campaign_cmd("workers", "one", "--json", "--state", state), stdout=full, stderr=subprocess.PIPE,
                           text=True, env=clean_env(), timeout=60)
    assert p.returncode == 1, p.stderr
    assert p.stderr.strip() == "campaign: cannot write: No space left on device"
