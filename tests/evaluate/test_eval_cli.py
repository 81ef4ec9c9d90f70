"""`campaign evaluate ...`: the four commands on files, their --json shapes, and file:line errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import cli

TABLE1_TSV = """\
# seed 001, Table 1
sentence\trank\tsets
1\tA\ts1 s10,s11
2\tB\ts3,s4,s5
3\tC\ts20,s21,s23 s1,s30,s50
"""


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli(*argv)
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_extract_json_and_table(tmp_path, capsys):
    gold = write(tmp_path, "gold.tsv", TABLE1_TSV)
    system = write(tmp_path, "sys.txt", "s10\ns11\ns4\ns16\ns50\ns51\n")
    code, out, _ = run(capsys, "evaluate", "extract", "--gold", gold, "--system", system, "--json")
    d = json.loads(out)
    assert code == 0
    assert d["precision"] == pytest.approx(4 / 6) and d["coverage"] == pytest.approx(5 / 9)
    assert d["weighted_coverage"] == pytest.approx(23 / 33) and d["required_length"] == 6
    assert d["minimal_extract"] == ["s1", "s3", "s4", "s5", "s30", "s50"]
    assert [p["e"] for p in d["per_sentence"]] == pytest.approx([1, 1 / 3, 1 / 3])
    code, out, _ = run(capsys, "evaluate", "extract", "--gold", gold, "--system", system, "--weights", "A=1,B=0.5,C=0.3")
    assert code == 0 and "weighted_coverage  0.7037" in out and "precision          0.6667" in out


def test_extract_gold_as_jsonl(tmp_path, capsys):
    rows = [{"sentence": 1, "rank": "A", "sets": [["s1"], ["s10", "s11"]]},
            {"sentence": "2", "rank": "B", "sets": [["s3", "s4", "s5"]]},
            {"sentence": "3", "rank": "C", "sets": [["s20", "s21", "s23"], ["s1", "s30", "s50"]]}]
    gold = write(tmp_path, "gold.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    system = write(tmp_path, "sys.txt", "s1\ns10\ns11\ns3\ns4\ns50\n")
    code, out, _ = run(capsys, "evaluate", "extract", "--gold", gold, "--system", system, "--json")
    d = json.loads(out)
    assert code == 0 and d["precision"] == 1.0 and d["coverage"] == pytest.approx(7 / 9)


def test_clusters_json(tmp_path, capsys):
    gold = write(tmp_path, "g.tsv", "item\tcluster\na\t1\nb\t1\nc\t1\nd\t2\ne\t2\nf\t2\n")
    pred = write(tmp_path, "p.tsv", "item\tcluster\tnote\nf\tz\t\ne\tz\t\nd\ty\tx\nc\ty\t\nb\tx\t\na\tx\t\n")
    code, out, _ = run(capsys, "evaluate", "clusters", "--gold", gold, "--pred", pred, "--json")
    d = json.loads(out)
    assert code == 0
    assert set(d) >= {"v_measure", "v_beta", "beta", "homogeneity", "completeness", "nmi", "vi", "nvi", "rand", "adjusted_rand"}
    assert d["homogeneity"] == pytest.approx(2 / 3) and d["rand"] == pytest.approx(2 / 3)
    assert d["adjusted_rand"] == pytest.approx(8 / 33) and d["beta"] == 1.5
    code, out, _ = run(capsys, "evaluate", "clusters", "--gold", gold, "--pred", pred, "--beta", "2", "--json")
    assert json.loads(out)["beta"] == 2.0


def test_hierarchy_json_reproduces_the_seed_example(tmp_path, capsys):
    h1 = write(tmp_path, "h1.tsv", "node\tparent\tnuggets\n1\t\tA\n2\t1\tB\n3\t2\tX\n4\t3\tC\n5\t3\tD\n6\t5\tE\n")
    h2 = write(tmp_path, "h2.tsv", "node\tparent\tnuggets\nr\t\tA\nd\tr\tD\ne\td\tE\nx\te\tX\nb\tx\tB\nc\tb\tC\n")
    code, out, _ = run(capsys, "evaluate", "hierarchy", "--gold", h1, "--pred", h2, "--json", "--per-nugget")
    d = json.loads(out)
    x = d["per_nugget"]["X"]
    assert code == 0 and (x["to"], x["supo"], x["subo"]) == (1.0, 0.25, 0.25)
    assert 0.8 * x["to"] + 0.1 * x["supo"] + 0.1 * x["subo"] == pytest.approx(0.85)
    assert d["ho"] == pytest.approx(0.8 * 13 / 15 + 0.1 * 22 / 45 + 0.1 * 11 / 24) and d["n_nuggets"] == 6
    code, out, _ = run(capsys, "evaluate", "hierarchy", "--gold", h1, "--pred", h2, "--weights", "1,0,0", "--json")
    assert json.loads(out)["ho"] == pytest.approx(13 / 15)


def test_nuggets_table(tmp_path, capsys):
    gold = write(tmp_path, "gold_nuggets.jsonl", json.dumps(
        {"hit": "h", "item": "a.s0", "first": 0, "last": 3, "workers": 3, "mace_weight": 1.2, "text": "plastic bottles leak chemicals"}) + "\n")
    system = write(tmp_path, "summary.txt", "Plastic bottles leak chemicals into water.\nOther things.\n")
    code, out, _ = run(capsys, "evaluate", "nuggets", "--gold", gold, "--system", system)
    assert code == 0 and "recall             1.0000" in out and "precision          0.5000" in out


G_CL = "item\tcluster\na\t1\nb\t2\n"
H_OK = "node\tparent\tnuggets\n1\t\tA\n"

MALFORMED = [
    # (command, files {name: text}, args using {name}, expected "file:line: message" fragment)
    ("clusters", {"g.tsv": "item\tlabel\na\t1\n", "p.tsv": G_CL}, ["--gold", "g.tsv", "--pred", "p.tsv"], "g.tsv:1: header must name"),
    ("clusters", {"g.tsv": G_CL, "p.tsv": "item\tcluster\na\t1\nb\n"}, ["--gold", "g.tsv", "--pred", "p.tsv"], "p.tsv:3: expected 2 tab-separated fields"),
    ("clusters", {"g.tsv": G_CL, "p.tsv": "item\tcluster\na\t1\n\n# c\na\t2\nb\t1\n"}, ["--gold", "g.tsv", "--pred", "p.tsv"], "p.tsv:5: item 'a' already assigned on line 2"),
    ("clusters", {"g.tsv": G_CL, "p.tsv": "item\tcluster\na\t1\nb\t\n"}, ["--gold", "g.tsv", "--pred", "p.tsv"], "p.tsv:3: item 'b' has an empty cluster"),
    ("clusters", {"g.tsv": G_CL, "p.tsv": "item\tcluster\na\t1\n"}, ["--gold", "g.tsv", "--pred", "p.tsv"], "g.tsv:3: item 'b' has no cluster in"),
    ("clusters", {"g.tsv": G_CL, "p.tsv": "item\tcluster\na\t1\nb\t1\nc\t1\n"}, ["--gold", "g.tsv", "--pred", "p.tsv"], "p.tsv:4: item 'c' is not in the gold"),
    ("clusters", {"g.tsv": G_CL, "p.tsv": ""}, ["--gold", "g.tsv", "--pred", "p.tsv"], "p.tsv: empty file"),
    ("clusters", {"g.tsv": G_CL}, ["--gold", "g.tsv", "--pred", "missing.tsv"], "missing.tsv: no such file"),
    ("extract", {"g.tsv": "sentence\trank\tsets\n1\tD\ts1\n", "s.txt": "s1\n"}, ["--gold", "g.tsv", "--system", "s.txt"], "g.tsv:2: rank must be one of A, B, C"),
    ("extract", {"g.tsv": "sentence\trank\tsets\n1\tA\ts1,,s2\n", "s.txt": "s1\n"}, ["--gold", "g.tsv", "--system", "s.txt"], "g.tsv:2: empty sentence id in set"),
    ("extract", {"g.tsv": "sentence\trank\tsets\n1\tA\ts1\n1\tB\ts2\n", "s.txt": "s1\n"}, ["--gold", "g.tsv", "--system", "s.txt"], "g.tsv:3: abstract sentence '1' already listed on line 2"),
    ("extract", {"g.tsv": "sentence\trank\tsets\n1\tA\t\n", "s.txt": "s1\n"}, ["--gold", "g.tsv", "--system", "s.txt"], "g.tsv:2: no set of source sentences"),
    ("extract", {"g.tsv": "sentence\trank\tsets\n1\tA\ts1\n", "s.txt": "s1\ns2 s3\n"}, ["--gold", "g.tsv", "--system", "s.txt"], "s.txt:2: expected one sentence id per line"),
    ("extract", {"g.tsv": "sentence\trank\tsets\n1\tA\ts1\n", "s.txt": "s1\ns1\n"}, ["--gold", "g.tsv", "--system", "s.txt"], "s.txt:2: sentence 's1' already listed on line 1"),
    ("extract", {"g.jsonl": '{"sentence": "1", "rank": "A", "sets": [["s1"]]}\n{"sentence": "2", "rank": "A", "sets": [[]]}\n', "s.txt": "s1\n"},
     ["--gold", "g.jsonl", "--system", "s.txt"], "g.jsonl:2: \"sets\" must be a non-empty list"),
    ("extract", {"g.jsonl": '{"sentence": "1", "rank": "A", "sets": [["s1"]]}\n{oops\n', "s.txt": "s1\n"},
     ["--gold", "g.jsonl", "--system", "s.txt"], "g.jsonl:2: not JSON"),
    ("extract", {"g.tsv": "sentence\trank\tsets\n1\tA\ts1\n", "s.txt": "s1\n"}, ["--gold", "g.tsv", "--system", "s.txt", "--weights", "A=1,B=x"], "--weights:"),
    ("nuggets", {"g.jsonl": '{"hit": "h", "item": "i", "first": 0, "last": 2, "workers": 3, "mace_weight": 1, "text": "a b c"}\n[1]\n', "s.txt": "a b c\n"},
     ["--gold", "g.jsonl", "--system", "s.txt"], "g.jsonl:2: expected a JSON object"),
    ("nuggets", {"g.jsonl": '{"hit": "h", "item": "i", "first": 0, "last": 2, "mace_weight": 1, "text": "a b c"}\n', "s.txt": "a b c\n"},
     ["--gold", "g.jsonl", "--system", "s.txt"], "g.jsonl:1: missing field 'workers'"),
    ("nuggets", {"g.jsonl": '\n{"hit": "h", "item": "i", "first": "0", "last": 2, "workers": 3, "mace_weight": 1, "text": "a b c"}\n', "s.txt": "a b c\n"},
     ["--gold", "g.jsonl", "--system", "s.txt"], "g.jsonl:2: field 'first' must be an integer, not \"0\""),
    ("nuggets", {"g.jsonl": '{"hit": "h", "item": "i", "first": 3, "last": 2, "workers": 3, "mace_weight": 1, "text": "a b c"}\n', "s.txt": "a b c\n"},
     ["--gold", "g.jsonl", "--system", "s.txt"], "g.jsonl:1: span first=3 last=2"),
    ("nuggets", {"g.jsonl": "", "s.txt": "a b c\n"}, ["--gold", "g.jsonl", "--system", "s.txt"], "g.jsonl: no gold nugget"),
    ("nuggets", {"g.jsonl": '{"hit": "h", "item": "i", "first": 0, "last": 2, "workers": 3, "mace_weight": 1, "text": "a b c"}\n', "s.txt": "\n\n"},
     ["--gold", "g.jsonl", "--system", "s.txt"], "s.txt: empty summary"),
    ("hierarchy", {"g.tsv": H_OK + "2\t9\tB\n", "p.tsv": H_OK}, ["--gold", "g.tsv", "--pred", "p.tsv"], "g.tsv:3: parent '9' of node '2' is not defined"),
    ("hierarchy", {"g.tsv": H_OK + "2\t3\tB\n3\t2\tC\n", "p.tsv": H_OK}, ["--gold", "g.tsv", "--pred", "p.tsv"], "g.tsv:3: node '2' is on a cycle"),
    ("hierarchy", {"g.tsv": H_OK + "2\t1\tB A\n", "p.tsv": H_OK}, ["--gold", "g.tsv", "--pred", "p.tsv"], "g.tsv:3: nugget 'A' is already in node '1' (line 2)"),
    ("hierarchy", {"g.tsv": H_OK + "1\t\tB\n", "p.tsv": H_OK}, ["--gold", "g.tsv", "--pred", "p.tsv"], "g.tsv:3: node '1' already defined on line 2"),
    ("hierarchy", {"g.tsv": H_OK + "2\t1\t\n", "p.tsv": H_OK}, ["--gold", "g.tsv", "--pred", "p.tsv"], "g.tsv:3: node '2' holds no nugget"),
    ("hierarchy", {"g.tsv": H_OK + "2\t1\tB\n", "p.tsv": H_OK}, ["--gold", "g.tsv", "--pred", "p.tsv"], "g.tsv:3: nugget 'B' is not in"),
]


@pytest.mark.parametrize("kind,files,args,expected", MALFORMED, ids=[m[3].split(":")[0] + ":" + m[0] + str(i) for i, m in enumerate(MALFORMED)])
def test_malformed_input_exits_2_with_file_and_line(tmp_path, capsys, kind, files, args, expected):
    for name, text in files.items():
        write(tmp_path, name, text)
    argv = [str(tmp_path / a) if a in files or a.endswith(".tsv") else a for a in args]
    code, out, err = run(capsys, "evaluate", kind, *argv)
    assert code == 2 and out == ""
    assert err.replace(str(tmp_path) + "/", "").startswith(expected), err


@pytest.mark.parametrize("argv", [
    ["evaluate", "clusters", "--gold", "g.tsv"],                                   # --pred missing
    ["evaluate", "clusters", "--gold", "g", "--pred", "p", "--beta", "-1"],
    ["evaluate", "nuggets", "--gold", "g", "--system", "s", "--threshold", "0"],
    ["evaluate", "hierarchy", "--gold", "g", "--pred", "p", "--weights", "1,2"],
    ["evaluate", "bogus"],
])
def test_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        cli(*argv)
    assert exc.value.code == 2
