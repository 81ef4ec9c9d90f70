"""Gold-nugget coverage of a summary, on hand-made nuggets and on what a nugget campaign writes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from campaign.evaluate.nuggets import GoldNugget, score_nuggets, tokens, units
from campaign.evaluate.readers import read_gold_nuggets
from campaign.steps.nugget_export import write_gold
from tests.support.cli import run_args, run_campaign
from tests.support.paths import WATER
from tests.support.specs import campaign, simulated, write_spec


def nug(text: str, workers: int, mace: float = 1.0, item: str = "d.s0") -> GoldNugget:
    return GoldNugget(hit="h", item=item, first=0, last=len(text.split()) - 1, workers=workers, mace_weight=mace, text=text)


GOLD = [
    nug("plastic bottles leak chemicals", 5, 3.0),
    nug("bottles end up in landfills", 3, 1.0),
    nug("tap water is cheaper than bottled water", 4, 0.5),
]


def test_tokens_drop_function_words_unless_nothing_else_is_left():
    assert tokens("The bottles of the world") == {"bottles", "world"}
    assert tokens("it is what it is") == {"it", "is", "what"}
    assert units("One. Two!\n\n  Three in the U.S. of A.  \nFour") == ["One. Two!", "Three in the U.S. of A.", "Four"]


def test_recall_is_support_weighted_and_precision_counts_units():
    summary = ["Plastic bottles can leak chemicals.", "Most bottles end up in landfills.", "Recycling is rare."]
    s = score_nuggets(GOLD, summary)
    assert [m.matched for m in s.matches] == [True, True, False]
    assert s.recall == pytest.approx(8 / 12) and s.recall_unweighted == pytest.approx(2 / 3)
    assert s.precision == pytest.approx(2 / 3)   # "Recycling is rare." matches nothing
    assert s.f1 == pytest.approx(2 * (2 / 3) * (8 / 12) / (2 / 3 + 8 / 12))
    # the third nugget {tap, water, cheaper, bottled}: only "water" is in no unit -> 0 partial credit here
    assert s.coverage == pytest.approx((5 + 3) / 12)
    mace = score_nuggets(GOLD, summary, weight="mace")
    assert mace.recall == pytest.approx(4 / 4.5)


def test_a_nugget_must_be_stated_in_one_sentence_not_assembled():
    spread = ["Tap water is good.", "It is cheaper.", "Bottled drinks sell."]
    s = score_nuggets([nug("tap water is cheaper than bottled water", 1)], spread)
    assert s.matches[0].coverage == pytest.approx(2 / 4) and s.matches[0].unit == 0
    assert score_nuggets([nug("tap water is cheaper than bottled water", 1)], spread, threshold=0.75).recall == 0


def test_reads_what_the_export_writes(tmp_path):
    rows = [{"hit": "nuggets-00000", "item": "a.s1", "first": 0, "last": 3, "workers": 3, "mace_weight": 1.7432,
             "text": "Plastic bottles leak chemicals"},
            {"hit": "nuggets-00000", "item": "a.s2", "first": 2, "last": 6, "workers": 4, "mace_weight": 2.5,
             "text": "end up in landfills «quoted»"}]
    path = write_gold(tmp_path, rows)
    gold = read_gold_nuggets(path)
    assert [(g.item, g.first, g.last, g.workers, g.mace_weight, g.text) for g in gold] == [
        (r["item"], r["first"], r["last"], r["workers"], r["mace_weight"], r["text"]) for r in rows]


@pytest.fixture(scope="module")
def tiny_campaign(tmp_path_factory):
    """Runs a two-HIT nugget campaign on two demo documents; returns (state dir, sentences by item)."""
    tmp = tmp_path_factory.mktemp("tiny-nuggets")
    with open(WATER / "documents.tsv", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t") if r["doc"] in ("arg219204", "arg219207")]
    assert len(rows) >= 8
    with open(tmp / "documents.tsv", "w", encoding="utf-8") as fh:
        fh.write("doc\tid\ttext\n" + "".join(f"{r['doc']}\t{r['id']}\t{r['text']}\n" for r in rows))
    task = {"kind": "nuggets", "window": 7, "assignments": 7, "reward": "0.07", "min_nugget_tokens": 3}
    config = write_spec(tmp / "campaigns.yaml", campaign("tiny-nuggets", task=task, budget="10.00", documents=tmp / "documents.tsv",
                                                         crowd=simulated(12, speed=3600, arrival_span="30m", truth=WATER / "sentence_truth.tsv")))
    proc = run_campaign(*run_args(config, tmp / "state", seed=1), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp / "state", {r["id"]: r["text"] for r in rows}


def _evaluate(gold: Path, system: Path, *extra: str) -> dict:
    proc = run_campaign("evaluate", "nuggets", "--gold", str(gold), "--system", str(system), "--json", *extra, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_evaluate_nuggets_on_a_campaigns_own_gold(tiny_campaign, tmp_path):
    state, sentences = tiny_campaign
    gold_path = state / "tiny-nuggets" / "gold_nuggets.jsonl"
    gold = [json.loads(line) for line in gold_path.read_text(encoding="utf-8").splitlines()]
    assert gold, "the simulated crowd agreed on no nugget"
    # every sentence of the documents: each nugget is a span of one of them, so all are covered fully
    everything = tmp_path / "all.txt"
    everything.write_text("\n".join(sentences.values()) + "\n", encoding="utf-8")
    full = _evaluate(gold_path, everything)
    assert full["recall"] == 1.0 and full["coverage"] == 1.0 and full["n_nuggets"] == len(gold)
    assert full["n_units"] == len(sentences)
    # an extract of the sentences with the most supported nugget covers at least that nugget's support
    top = max(gold, key=lambda g: g["workers"])
    lead = tmp_path / "one.txt"
    lead.write_text(sentences[top["item"]] + "\n", encoding="utf-8")
    one = _evaluate(gold_path, lead)
    same_item = sum(g["workers"] for g in gold if g["item"] == top["item"])
    assert one["recall"] >= same_item / sum(g["workers"] for g in gold) - 1e-12
    assert one["precision"] == 1.0 and one["n_units"] == 1
    assert {(n["item"], n["first"]) for n in one["nuggets"] if n["item"] == top["item"] and n["matched"]} == \
        {(g["item"], g["first"]) for g in gold if g["item"] == top["item"]}
    # text about something else covers nothing
    other = tmp_path / "other.txt"
    other.write_text("Penguins live in Antarctica. Volcanoes erupt.\n", encoding="utf-8")
    none = _evaluate(gold_path, other, "--weight", "mace")
    assert none["recall"] == 0 and none["precision"] == 0 and none["weight"] == "mace"
