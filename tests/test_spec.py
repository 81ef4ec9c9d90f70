"""Spec validation: every problem reported as file:line: field: message; unknown keys are errors."""

from decimal import Decimal
from pathlib import Path

import pytest

from campaign.spec import SpecError, load_spec
from tests.support.cli import cli
from tests.support.paths import ROOT
from tests.support.specs import VALID_HEAD
from tests.support.specs import spec_problems as problems
from tests.support.specs import write_spec_text as write

GOOD = VALID_HEAD + """\
      reward: "0.06"
    budget: "10.00"
    crowd:
      kind: simulated
      truth: none
"""


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
    assert cli("validate", str(p)) == 2
    err = capsys.readouterr().err
    assert "campaigns[0].colour: unknown key" in err and "nothing was posted" in err
    p = write(tmp_path, GOOD)
    assert cli("validate", str(p)) == 0


def test_production_and_simulated_crowd_do_not_mix(tmp_path):
    ps = problems(tmp_path, GOOD.replace("    crowd:", "    marketplace: mturk\n    crowd:"))
    assert any("simulated crowd can only work the built-in marketplace" in p for p in ps)


# --- one type per stage kind, a registry for new kinds --------------------------------------------------

def test_shipped_specs_keep_their_fingerprints(monkeypatch):
    """A stored campaign compares this on resume; these are the values stored before stage types split."""
    monkeypatch.chdir(ROOT)
    got = {c.name: c.fingerprint() for f in ("campaigns.yaml", "examples/two-stage.yaml") for c in load_spec(f).campaigns}
    assert got == {"water-bottles": "29e4155bd439217f", "water-nuggets": "4cccb6745081bf55",
                   "water-two-stage": "c64d533c6b6a7933"}


def test_each_kind_gets_its_own_stage_type_with_only_its_fields(tmp_path):
    from campaign.stage import Stage
    from campaign.tasks.likert import LikertStage
    from campaign.tasks.nuggets import NuggetStage
    from campaign.tasks.ranking import RankingStage

    c = load_spec(ROOT / "examples" / "two-stage.yaml").campaigns[0]
    likert, ranking = c.stages
    assert type(likert) is LikertStage and type(ranking) is RankingStage and isinstance(likert, Stage)
    assert ranking.source == "likert" and ranking.shortlist == 30 and not hasattr(likert, "shortlist")
    nuggets = load_spec(ROOT / "campaigns.yaml").campaign("water-nuggets").stages[0]
    assert type(nuggets) is NuggetStage and nuggets.window == 7 and nuggets.qualifications.approval_rate == 98
    assert not hasattr(nuggets, "keep")


def test_a_field_of_another_kind_is_refused_and_says_whose_it_is(tmp_path):
    ps = problems(tmp_path, GOOD.replace("      kind: likert\n", "      kind: likert\n      shortlist: 10\n      window: 5\n"))
    assert any(p.endswith("campaigns[0].task.shortlist: unknown key here (only ranking stages take it)") for p in ps)
    assert any(p.endswith("campaigns[0].task.window: unknown key here (only nuggets stages take it)") for p in ps)


def test_unknown_kind_lists_registered_kinds_with_a_hint(tmp_path):
    (p,) = problems(tmp_path, GOOD.replace("kind: likert", "kind: rankng"))
    assert p.endswith("campaigns[0].task.kind: must be one of likert, ranking, nuggets, got 'rankng' (did you mean 'ranking'?)")
    assert ":7:" in p


def test_a_kind_defined_elsewhere_brings_its_own_stage_type(tmp_path):
    from dataclasses import dataclass

    from campaign import tasks
    from campaign.stage import Stage, _string, opt
    from campaign.tasks.kind import TaskKind

    @dataclass(frozen=True, kw_only=True)
    class YesNoStage(Stage):
        needs_input = "propositions"
        may_be_first = True
        items_per_hit: int = 3
        assignments: int = 3
        reward: Decimal = Decimal("0.02")
        title: str = "Yes or no?"
        description: str = "Answer yes or no."
        question: str = opt("Is this important?", _string)

        def problems(self) -> list[tuple[str, str]]:
            return super().problems() + ([] if self.question.endswith("?") else [("question", "must end with '?'")])

    class YesNo(TaskKind):  # only what reading a spec asks of a kind
        name = "yesno"
        stage_type = YesNoStage

        def plan(self, stage, items, traps, seed):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def page(self, stage, items, topic):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def parse(self, stage, fields, items):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    with tasks.registered(YesNo()):
        text = GOOD.replace("      kind: likert\n      reward: \"0.06\"\n", "      kind: yesno\n      question: Is it true?\n")
        stage = load_spec(write(tmp_path, text)).campaigns[0].stages[0]
        assert type(stage) is YesNoStage and stage.kind == "yesno" and stage.question == "Is it true?"
        assert (stage.items_per_hit, stage.reward, stage.lifetime) == (3, Decimal("0.02"), 3 * 86400)
        ps = problems(tmp_path, text.replace("Is it true?", "Is it true"))
        assert ps == [f"{tmp_path / 'campaigns.yaml'}:8: campaigns[0].task.question: must end with '?'"]
        ps = problems(tmp_path, GOOD.replace("kind: likert", "kind: yesnoo"))
        assert any("must be one of likert, ranking, nuggets, yesno, got 'yesnoo' (did you mean 'yesno'?)" in p for p in ps)
        ps = problems(tmp_path, GOOD.replace("      kind: likert\n", "      kind: likert\n      question: Why?\n"))
        assert any(p.endswith("task.question: unknown key here (only yesno stages take it)") for p in ps)
    assert "yesno" not in tasks.names()
    assert any("must be one of likert, ranking, nuggets, got 'yesno'" in p for p in problems(tmp_path, text))

    class Bad(YesNo):
        stage_type = dict  # type: ignore[assignment]

    with pytest.raises(TypeError):
        tasks.register(Bad())
    assert "yesno" not in tasks.names()


def test_stage_rules_come_from_the_type(tmp_path):
    ps = problems(tmp_path, GOOD.replace("kind: likert", "kind: nuggets"))
    assert any(p.endswith("campaigns[0].task.kind: a nuggets stage needs 'input: documents'") for p in ps)
    ps = problems(tmp_path, GOOD.replace("kind: likert", "kind: ranking\n      items_per_hit: 1"))
    assert any(p.endswith("task.items_per_hit: a ranking HIT needs at least 2 items") for p in ps)
    two = GOOD.replace("    task:\n      kind: likert\n      reward: \"0.06\"\n",
                       "    stages:\n      - kind: likert\n      - kind: ranking\n        source: nope\n")
    ps = problems(tmp_path, two)
    assert any(p.endswith("stages[1].source: a ranking stage after others must name an earlier stage as 'source'") for p in ps)


# --- inputs and YAML a new user can get wrong (issue 15) ------------------------------------------------

def test_zero_reward_is_refused(tmp_path):
    (p,) = problems(tmp_path, GOOD.replace('"0.06"', '"0.00"'))
    assert p.endswith("campaigns[0].task.reward: must be at least $0.01 (MTurk's minimum reward), got $0.00") and ":8:" in p


def test_non_utf8_yaml_is_a_problem_with_its_line(tmp_path):
    p = write(tmp_path, GOOD)
    p.write_bytes(GOOD.replace("A topic", "Caf\xe9").encode("latin-1"))
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert exc.value.problems == [f"{p}:3: (file): not UTF-8 text (byte 0xe9); save the file as UTF-8"]


def test_alias_bomb_is_refused_fast(tmp_path):
    import time

    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join(f'*a{i - 1}' for _ in range(9))}]" for i in range(1, 10)]
    p = tmp_path / "bomb.yaml"
    p.write_text("\n".join(lines) + "\ncampaigns: *a9\n", encoding="utf-8")
    t0 = time.perf_counter()
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert time.perf_counter() - t0 < 20.0  # unguarded, 9**10 nodes take far longer; a loaded machine takes 1-2 s
    assert "(yaml): the document expands to more than" in exc.value.problems[0]


def test_missing_absolute_input_path_does_not_say_relative(tmp_path):
    absent = tmp_path / "elsewhere" / "nope.tsv"
    ps = problems(tmp_path, GOOD.replace("props.tsv", str(absent)))
    assert any(p.endswith(f"input.propositions: file not found: {absent}") for p in ps)
    ps = problems(tmp_path, GOOD.replace("props.tsv", "nope.tsv"))
    assert any(p.endswith(f"input.propositions: file not found: nope.tsv (relative to {tmp_path})") for p in ps)


BAD_TSVS = {
    "empty": (b"", ":1: the file is empty"),
    "header only": (b"id\ttext\n", ":2: no propositions found below the header"),
    "duplicate ids": (b"id\ttext\na\tx\na\ty\n", ":3: duplicate id 'a'"),
    "ragged": (b"id\ttext\na\tx\textra\n", ":2: expected 2 tab-separated columns, got 3"),
    "not utf-8": (b"id\ttext\na\tna\xefve\n", ":2: not UTF-8 text (byte 0xef)"),
}


@pytest.mark.parametrize("case", sorted(BAD_TSVS))
def test_validate_and_run_catch_bad_input_files_before_creating_anything(tmp_path, capsys, monkeypatch, case):
    data, message = BAD_TSVS[case]
    p = write(tmp_path, GOOD)
    (tmp_path / "props.tsv").write_bytes(data)
    assert cli("validate", str(p)) == 2
    err = capsys.readouterr().err
    tsv = tmp_path / "props.tsv"
    assert f"{p}:5: campaigns[0].input.propositions: {tsv}{message}" in err
    monkeypatch.chdir(tmp_path)
    state = tmp_path / "state"
    assert cli("run", "--config", str(p), "--state", str(state), "--quiet") == 2
    assert not state.exists() and sorted(x.name for x in tmp_path.iterdir()) == ["campaigns.yaml", "props.tsv"]


def test_bad_truth_file_is_caught_by_validate(tmp_path):
    (tmp_path / "truth.tsv").write_text("id\timportance\na\thigh\n", encoding="utf-8")
    ps = problems(tmp_path, GOOD.replace("truth: none", "truth: truth.tsv"))
    assert any(p.endswith(f"campaigns[0].crowd.truth: {tmp_path / 'truth.tsv'}:2: importance must be a number, got 'high'") for p in ps)


def test_unknown_yaml_tag_and_duplicate_keys_are_problems_with_lines(tmp_path):
    ps = problems(tmp_path, GOOD.replace("topic: A topic", "topic: !foo A topic"))
    assert len(ps) == 1 and ps[0].startswith(f"{tmp_path / 'campaigns.yaml'}:3: (yaml): could not determine a constructor")
    ps = problems(tmp_path, GOOD.replace('      reward: "0.06"\n', '      reward: "0.06"\n      reward: "0.60"\n'))
    assert ps == [f"{tmp_path / 'campaigns.yaml'}:9: campaigns[0].task.reward: duplicate key (given twice in the same mapping; only the last would count)"]


def test_repeat_is_read_checked_and_leaves_old_fingerprints_alone(tmp_path):
    plain = load_spec(ROOT / "examples" / "two-stage.yaml").campaigns[0]
    assert all(s.repeat.share == 0.0 for s in plain.stages)
    text = (ROOT / "examples" / "two-stage.yaml").read_text(encoding="utf-8").replace(": ukpconvarg1-water/", f": {ROOT}/examples/ukpconvarg1-water/")
    anchor = "      - name: likert\n"
    assert anchor in text

    def with_repeat(body: str, name: str) -> Path:
        p = tmp_path / name
        p.write_text(text.replace(anchor, anchor + f"        repeat: {body}\n", 1), encoding="utf-8")
        return p

    for share, same in (("0", True), ("0.25", False)):
        c = load_spec(with_repeat(f"{{share: {share}}}", f"r{share}.yaml")).campaigns[0]
        assert c.stages[0].repeat.share == float(share) and c.stages[1].repeat.share == 0.0
        assert (c.fingerprint() == plain.fingerprint()) is same  # no repeat: stored campaigns still resume
    with pytest.raises(SpecError) as err:
        load_spec(with_repeat("{shar: 2}", "bad.yaml"))
    assert "repeat.shar: unknown key (did you mean 'share'?)" in str(err.value)


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_yaml_nan_and_infinity_are_no_number(tmp_path, value):
    """`speed: .nan` passed (NaN fails every range comparison) and reached the simulated crowd's clock."""
    text = GOOD.replace("      truth: none\n", f"      truth: none\n      speed: {value}\n")
    (p,) = problems(tmp_path, text)
    assert p.endswith(f"campaigns[0].crowd.speed: must be a finite number, got {float(value.replace('.', ''))}")


def test_a_whole_number_without_an_upper_bound_still_has_one(tmp_path):
    text = GOOD.replace('      reward: "0.06"\n', '      reward: "0.06"\n      qualifications:\n        approved_hits: 1000000000000\n')
    (p,) = problems(tmp_path, text)
    assert p.endswith("task.qualifications.approved_hits: must be at most 2147483647, got 1000000000000")


def test_a_folder_named_as_an_input_file_is_called_a_folder(tmp_path):
    (tmp_path / "inputs").mkdir()
    ps = problems(tmp_path, GOOD.replace("props.tsv", "inputs"))
    assert any(p.endswith(f"input.propositions: inputs is a folder; name a file (relative to {tmp_path})") for p in ps), ps


def test_a_mistyped_kind_is_one_problem_not_a_cascade(tmp_path):
    """Before: `kind: likertt` also reported the stage's `traps` as an unknown key; and a budget that is no
    amount (`5.001`) was also said to be 'must be more than 0'."""
    spec = GOOD.replace("      kind: likert\n", "      kind: likertt\n      traps: {share: 0.5, texts: [\"Not important.\"]}\n")
    assert "traps:" in spec
    ps = problems(tmp_path, spec)
    assert len(ps) == 1 and "must be one of likert, ranking, nuggets, got 'likertt'" in ps[0], ps
    ps = problems(tmp_path, GOOD.replace('budget: "10.00"', "budget: 5.001"))
    assert len(ps) == 1 and "has more than two decimals" in ps[0], ps


def test_a_ranking_that_keeps_its_whole_shortlist_or_cannot_fill_a_hit_is_warned_about():
    from campaign.tasks.ranking import RankingStage

    assert RankingStage(name="r", source="l", shortlist=30, keep=15).warnings(first=False) == []
    said = dict(RankingStage(name="r", source="l", shortlist=4, keep=50).warnings(first=False))
    assert said["keep"].startswith("50 is not below shortlist (4)") and said["shortlist"].startswith("4 is fewer than a HIT shows (5)")
    assert RankingStage(name="r", shortlist=4, keep=50).warnings(first=True) == []  # a first stage ranks every item
    assert dict(RankingStage(name="r", shortlist=4, keep=50, assignments=1).warnings(first=True)).keys() == {"assignments"}


def test_one_worker_per_hit_is_warned_about(tmp_path):
    base = load_spec(write(tmp_path, GOOD)).warnings  # (its simulated crowd knows no truth: one warning of its own)
    assert not any("worker per HIT" in w for w in base)
    said = [w for w in load_spec(write(tmp_path, GOOD.replace("      kind: likert\n", "      kind: likert\n      assignments: 1\n"))).warnings
            if "crowd.truth" not in w]
    assert len(said) == 1 and "task.assignments: 1 worker per HIT: no answer can be checked" in said[0], said


def test_a_yaml_escape_spelling_a_control_character_is_refused_where_it_stands(tmp_path):
    """Before: `texts: ["This \\x00 sentence"]` passed validate, and every HIT carrying that trap was then
    refused by the marketplace (XMLParseError)."""
    spec = GOOD.replace("      kind: likert\n", '      kind: likert\n      traps: {share: 0.5, texts: ["A \\x00 trap"]}\n')
    ps = problems(tmp_path, spec)
    assert len(ps) == 1 and ps[0].endswith("task.traps.texts[0]: holds the control character U+0000 (a YAML escape?), "
                                           "which no HIT page can carry"), ps
    assert problems(tmp_path, GOOD.replace("A topic", '"A \\x1b[31m topic"'))[0].endswith(
        "topic: holds the control character U+001B (a YAML escape?), which no HIT page can carry")
