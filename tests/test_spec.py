"""Spec validation: every problem reported as file:line: field: message; unknown keys are errors."""

from decimal import Decimal
from pathlib import Path

import pytest

from campaign.commands import main as commands_main
from campaign.spec import SpecError, load_spec

ROOT = Path(__file__).resolve().parent.parent

GOOD = """\
campaigns:
  - name: demo
    topic: A topic
    input:
      propositions: props.tsv
    task:
      kind: likert
      reward: "0.06"
    budget: "10.00"
    crowd:
      kind: simulated
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "props.tsv").write_text("id\ttext\na\tFirst\nb\tSecond\n", encoding="utf-8")
    p = tmp_path / "campaigns.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(SpecError) as exc:
        load_spec(write(tmp_path, text))
    return exc.value.problems


def test_shipped_demo_spec_is_valid():
    spec = load_spec(ROOT / "campaigns.yaml")
    c = spec.campaigns[0]
    assert c.stages[0].kind == "likert" and c.stages[0].assignments == 5 and c.stages[0].reward == Decimal("0.06")


def test_shipped_two_stage_example_is_valid_and_reads_paths_from_its_folder():
    c = load_spec(ROOT / "examples" / "two-stage.yaml").campaigns[0]
    assert [s.kind for s in c.stages] == ["likert", "ranking"]
    ranking = c.stages[1]
    assert (ranking.items_per_hit, ranking.assignments, ranking.reward) == (5, 5, Decimal("0.05"))
    assert Path(c.input_path).is_file() and Path(c.crowd.truth).is_file()


def test_defaults_follow_the_seed_papers(tmp_path):
    c = load_spec(write(tmp_path, GOOD)).campaigns[0]
    s = c.stages[0]
    assert (s.items_per_hit, s.assignments, s.reward) == (5, 5, Decimal("0.06"))
    assert s.qualifications.approval_rate == 95


def test_unknown_key_is_an_error_with_line_and_suggestion(tmp_path):
    text = GOOD.replace("      reward: \"0.06\"\n", "      reward: \"0.06\"\n      asignments: 3\n")
    (p,) = problems(tmp_path, text)
    assert p.endswith("campaigns[0].task.asignments: unknown key (did you mean 'assignments'?)")
    assert ":9:" in p


def test_negative_reward_and_three_decimals(tmp_path):
    ps = problems(tmp_path, GOOD.replace('"0.06"', '"-0.06"'))
    assert any("task.reward: must not be negative" in p for p in ps)
    ps = problems(tmp_path, GOOD.replace('"0.06"', '"0.065"'))
    assert any("task.reward" in p and "two decimals" in p for p in ps)


def test_missing_input_file(tmp_path):
    ps = problems(tmp_path, GOOD.replace("props.tsv", "nope.tsv"))
    assert any("input.propositions: file not found: nope.tsv" in p and ":5:" in p for p in ps)


def test_budget_below_one_hit(tmp_path):
    ps = problems(tmp_path, GOOD.replace('"10.00"', '"0.20"'))
    assert any("budget" in p and "below the cost of one HIT ($0.35" in p for p in ps)


def test_all_problems_at_once(tmp_path):
    text = GOOD.replace('"0.06"', '"-1"').replace('"10.00"', "0").replace("kind: simulated", "kind: robots")
    ps = problems(tmp_path, text)
    assert len(ps) >= 3


def test_missing_file_and_yaml_errors(tmp_path):
    with pytest.raises(SpecError) as exc:
        load_spec(tmp_path / "absent.yaml")
    assert "no such file" in exc.value.problems[0]
    bad = tmp_path / "bad.yaml"
    bad.write_text("campaigns:\n  - name: [unclosed\n", encoding="utf-8")
    with pytest.raises(SpecError) as exc:
        load_spec(bad)
    assert exc.value.problems[0].startswith(f"{bad}:")


def test_validate_command_exits_2_and_prints_problems(tmp_path, capsys):
    p = write(tmp_path, GOOD.replace("topic: A topic", "topic: A topic\n    colour: blue"))
    assert commands_main(["validate", str(p)]) == 2
    err = capsys.readouterr().err
    assert "campaigns[0].colour: unknown key" in err and "nothing was posted" in err
    p = write(tmp_path, GOOD)
    assert commands_main(["validate", str(p)]) == 0


def test_production_and_simulated_crowd_do_not_mix(tmp_path):
    ps = problems(tmp_path, GOOD.replace("    crowd:", "    marketplace: mturk\n    crowd:"))
    assert any("simulated crowd can only work the built-in marketplace" in p for p in ps)
