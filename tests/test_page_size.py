"""HIT pages the marketplace would refuse (over 65,535 bytes) are found before anything is made
(`campaign.page_size`): a 2 MB proposition passed `validate`, and the run failed to post its HIT and
ended `finished` with nothing of it posted."""

from __future__ import annotations

from pathlib import Path

from campaign.estimate import plan_items
from campaign.page_size import oversized
from campaign.spec import load_spec
from tests.support.cli import cli_output
from tests.support.specs import NO_CROWD, campaign, write_spec


def _spec(tmp_path: Path, texts: list[str], stages: list[dict] | None = None) -> Path:
    lines = ["id\ttext"] + [f"p{i}\t{t}" for i, t in enumerate(texts)]
    (tmp_path / "props.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    kw = {"stages": stages} if stages else {"task": {"kind": "likert"}}
    return write_spec(tmp_path / "c.yaml", campaign("c", budget="50.00", crowd=NO_CROWD, propositions="props.tsv", **kw))


def test_validate_and_run_refuse_a_page_too_large_and_name_its_longest_item(tmp_path):
    spec = _spec(tmp_path, ["short one"] * 9 + ["word " * 20_000])
    v = cli_output("validate", spec, cwd=tmp_path)
    assert v.returncode == 2
    assert "stage likert: a HIT page would be" in v.stderr and "p9, has 99,999 characters" in v.stderr  # the trailing space is trimmed
    r = cli_output("run", "--config", spec, "--state", tmp_path / "state", cwd=tmp_path)
    assert r.returncode == 2 and "nothing was posted" in r.stderr
    assert not (tmp_path / "state").exists()


def test_a_later_stage_is_checked_with_the_longest_items_it_could_be_given(tmp_path):
    stages = [{"name": "likert", "kind": "likert", "items_per_hit": 2},
              {"name": "ranking", "kind": "ranking", "source": "likert", "shortlist": 10, "keep": 5}]
    # 14,000 characters each: two fit a Likert HIT of two, five do not fit a ranking HIT of five
    spec = _spec(tmp_path, ["x " * 7_000] * 6 + ["short"] * 14, stages)
    c = load_spec(spec).campaigns[0]
    problems = oversized(c, plan_items(c))
    assert len(problems) == 1 and "stage ranking: a HIT page would be" in problems[0]


def test_the_shipped_specs_fit():
    from tests.support.paths import ROOT

    for name in ("campaigns.yaml", "examples/two-stage.yaml", "examples/prolific.yaml", "examples/hostile.yaml"):
        for c in load_spec(ROOT / name).campaigns:
            assert oversized(c, plan_items(c)) == [], (name, c.name)
