"""`campaign aggregate LABELS.tsv`: any platform's labels in, item labels and worker competences out."""

import json

import numpy as np
import pytest

from campaign.aggregate import auto
from campaign.aggregate import cli as aggregate_cli
from tests.support.cli import cli


def write(path, rows, header="item\tworker\tlabel"):
    path.write_text(header + "\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows), encoding="utf-8")
    return path


def crowd(seed=0, items=60):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(items):
        t = "yes" if rng.random() < 0.5 else "no"
        for w in rng.choice(12, size=5, replace=False):
            right = rng.random() < (0.9 if w < 8 else 0.5)
            rows.append((f"item{i}", f"W{w}", t if right else ("no" if t == "yes" else "yes")))
    return rows


def test_json_output_for_every_method(tmp_path, capsys):
    f = write(tmp_path / "labels.tsv", crowd())
    for method in ("auto", "majority", "mace", "ds"):
        assert cli("aggregate", str(f), "--method", method, "--json") == 0
        out = json.loads(capsys.readouterr().out)
        assert out["requested"] == method and out["method"] in ("majority", "mace", "ds")
        assert len(out["items"]) == 60 and set(out["items"].values()) <= {"yes", "no"}
        assert set(out["workers"]) == {f"W{k}" for k in range(12)}
        good = np.mean([out["workers"][f"W{k}"]["competence"] for k in range(8)])
        bad = np.mean([out["workers"][f"W{k}"]["competence"] for k in range(8, 12)])
        assert good > bad, method
    assert aggregate_cli.METHODS == auto.METHODS


def test_table_output_names_the_method(tmp_path, capsys):
    f = tmp_path / "labels.tsv"  # columns in another order, and one more: found by name
    f.write_text("worker\tlabel\titem\textra\n" + "".join(f"{w}\t{lab}\t{i}\tx\n" for i, w, lab in crowd()), encoding="utf-8")
    assert cli("aggregate", str(f)) == 0
    out = capsys.readouterr().out
    assert out.startswith("method: ") and "item\tlabel" in out and "worker\tcompetence\tlabels" in out


def test_bad_input_is_reported_by_file_and_line(tmp_path, capsys):
    f = tmp_path / "bad.tsv"
    f.write_text("item\tworker\tlabel\na\tw1\tx\nb\tw1\nc\t\ty\na\tw1\tz\n", encoding="utf-8")
    assert cli("aggregate", str(f)) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"{f}:3: 2 field(s), the header has 3 (fields are tab-separated)", f"{f}:4: empty worker",
                   f"{f}:5: worker 'w1' already labelled item 'a' (line 2)"]
    g = write(tmp_path / "nohead.tsv", [("a", "w1", "x")], header="id\tannotator\tanswer")
    assert cli("aggregate", str(g)) == 2
    assert capsys.readouterr().err.startswith(f"{g}:1: header lacks column(s) item, worker, label")
    assert cli("aggregate", str(tmp_path / "missing.tsv")) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "empty.tsv").write_text("", encoding="utf-8")
    assert cli("aggregate", str(tmp_path / "empty.tsv")) == 2
    assert ":1: the file is empty" in capsys.readouterr().err
    (tmp_path / "latin.tsv").write_bytes(b"item\tworker\tlabel\na\tw\t\xe9\n")
    assert cli("aggregate", str(tmp_path / "latin.tsv")) == 2
    assert "not UTF-8" in capsys.readouterr().err



def test_nothing_goes_to_standard_error_off_a_terminal(tmp_path, capsys):
    """A pipe or a file gets the same output as before the progress bar, and nothing on standard error."""
    f = write(tmp_path / "labels.tsv", crowd())
    assert cli("aggregate", str(f)) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_progress_is_drawn_on_a_terminal(tmp_path):
    """Before: 100,000 labels took about 40 s with nothing on the screen. Now a terminal shows which fit
    is running (a real pty, tests/support/terminal.py), and the bar is gone once the result is printed."""
    from tests.support.terminal import capture_in_pty

    f = write(tmp_path / "labels.tsv", crowd(items=4000))
    drawn = capture_in_pty(["aggregate", str(f)], seconds=120, cols=80)
    assert "aggregating" in drawn and "held-back fold 1/5" in drawn, drawn[-2000:]
    assert drawn.rstrip().splitlines()[-1].startswith("W")  # the worker table ends it


def test_text_from_the_file_reaches_the_terminal_inert(tmp_path, capsys):
    """A label or worker id holding an escape sequence (the file may carry workers' own words) was printed
    raw: `\\x1b[31m` recoloured the operator's terminal."""
    from campaign.untrusted import inert

    f = tmp_path / "labels.tsv"
    f.write_text("item\tworker\tlabel\ni1\tw1\t\x1b[31mred\ni1\tw\x9b2\tcafé\n", encoding="utf-8")
    assert cli("aggregate", str(f)) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x9b" not in out and "\\x1b[31mred" in out and "w\\x9b2" in out
    assert inert("café\tx\x7f") == "café\\tx\\x7f"  # other text kept as it is, controls escaped one by one
