"""`campaign aggregate` reads the answers export as it is: only kept rows, one label per assignment."""

import json

from campaign.aggregate.labels import read_labels
from campaign.answers.export import COLUMNS
from tests.support.cli import cli


def export_file(path, rows):
    lines = ["\t".join(COLUMNS)]
    for r in rows:
        full = {c: "" for c in COLUMNS} | r
        lines.append("\t".join(str(full[c]) for c in COLUMNS))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def row(item, worker, label, assignment, kept="true", first="", last=""):
    return {"campaign": "c", "stage": "s", "kind": "nuggets", "hit": "h1", "assignment": assignment, "worker": worker,
            "item": item, "label": label, "first": first, "last": last, "status": "approved", "excluded": "false",
            "trap": "false", "kept": kept}


def test_rows_not_kept_are_left_out_and_spans_of_one_answer_are_one_label(tmp_path):
    f = export_file(tmp_path / "answers.tsv", [
        row("s1", "w1", 1, "a1", first=0, last=3), row("s1", "w1", 1, "a1", first=5, last=8),  # two spans, one label
        row("s1", "w2", 0, "a2"), row("s1", "w3", 1, "a3", first=0, last=3),
        row("s1", "w4", 0, "a4", kept="false"),  # rejected or excluded: not read
        row("s1", "w1", 0, "a5"),  # the same worker again in another assignment (a topped-up HIT)
    ])
    assert read_labels(f) == [("s1", "w1", "1"), ("s1", "w2", "0"), ("s1", "w3", "1"), ("s1", "w1", "0")]


def test_two_labels_in_one_assignment_are_reported(tmp_path, capsys):
    f = export_file(tmp_path / "answers.tsv", [row("s1", "w1", 1, "a1"), row("s1", "w1", 0, "a1")])
    assert cli("aggregate", str(f)) == 2
    assert "labelled item 's1' '1' and '0' in one assignment ('a1')" in capsys.readouterr().err


def test_plain_files_keep_their_rule(tmp_path, capsys):
    f = tmp_path / "plain.tsv"
    f.write_text("item\tworker\tlabel\nx\tw\t1\nx\tw\t2\n", encoding="utf-8")
    assert cli("aggregate", str(f)) == 2
    assert "already labelled" in capsys.readouterr().err


def test_json_output_of_an_export_is_strict_json(tmp_path, capsys):
    f = export_file(tmp_path / "answers.tsv", [row(f"s{i}", f"w{k}", (i + k) % 2, f"a{i}{k}") for i in range(6) for k in range(4)])
    assert cli("aggregate", str(f), "--json") == 0
    out = json.loads(capsys.readouterr().out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert out["labels"] == 24


def test_json_has_no_nan_where_a_method_gives_a_worker_no_competence(tmp_path, capsys, monkeypatch):
    from campaign.aggregate import auto

    def fake(triples, method, seed=0, progress=None):
        return {"s0": "1"}, {"w0": float("nan")}, "mace", {"heldout": {"mace": float("-inf")}}

    monkeypatch.setattr(auto, "aggregate", fake)
    f = export_file(tmp_path / "answers.tsv", [row("s0", "w0", 1, "a0"), row("s0", "w1", 1, "a1")])
    assert cli("aggregate", str(f), "--json") == 0
    out = json.loads(capsys.readouterr().out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert out["workers"] == {"w0": {"competence": None, "labels": 1}, "w1": {"competence": None, "labels": 1}}
    assert out["evidence"] == {"heldout": {"mace": None}}
    assert cli("aggregate", str(f)) == 0
    assert "w0\t-\t1" in capsys.readouterr().out
