"""A nugget campaign over raw text: a folder of 20 paragraphs, split into sentences, planned into
balanced windows, run against the built-in marketplace and the simulated crowd."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from campaign.store import HitRow, ItemRow, Store
from tests.support.cli import run_args, run_campaign
from tests.support.specs import campaign, simulated, write_spec

SENTENCES = ["Bottled water costs far more than the tap water it often is.",
             "Plastic bottles take hundreds of years to break down in landfills.",
             "Many cities have banned the sale of bottled water in public buildings.",
             "Tap water is tested more often than bottled water in most countries.",
             "Some people buy bottled water because they distrust their local supply.",
             "Recycling rates for plastic bottles remain low in many regions.",
             "The bottling industry employs thousands of people.",
             "Dr. Smith of the U.S. agency said the bans saved 2.5 tons of plastic."]


def paragraph(n: int, length: int) -> str:
    return " ".join(SENTENCES[(n + i) % len(SENTENCES)] for i in range(length))


@pytest.mark.slow
def test_a_folder_of_paragraphs_runs_as_a_nugget_campaign(tmp_path):
    texts = tmp_path / "texts"
    texts.mkdir()
    lengths = [1, 2, 3, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 3, 4, 6, 8, 9, 2, 16]  # 20 paragraphs
    for n, length in enumerate(lengths):
        (texts / f"p{n:02d}.txt").write_text(paragraph(n, length) + "\n", encoding="utf-8")
    truth = ["id\timportance"] + [f"p{n:02d}.s{i}\t{0.2 + 0.6 * ((n + i) % 3) / 2}"
                                  for n, length in enumerate(lengths) for i in range(length)]
    (tmp_path / "truth.tsv").write_text("\n".join(truth) + "\n", encoding="utf-8")
    spec = write_spec(tmp_path / "campaigns.yaml", campaign(
        "paragraphs", documents="texts", task={"kind": "nuggets", "assignments": 3, "min_workers": 2}, budget="40.00",
        crowd=simulated(15, speed=3600, arrival_span="30m", truth="truth.tsv")))
    state = tmp_path / "state"
    proc = run_campaign(*run_args(spec, state), timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    store = Store.open(state)
    with store.session() as s:
        items = s.exec(select(ItemRow).where(ItemRow.campaign == "paragraphs")).all()
        hits = s.exec(select(HitRow).where(HitRow.campaign == "paragraphs")).all()
    store.close()
    assert sorted(i.item_key for i in items) == sorted(line.split("\t")[0] for line in truth[1:])
    doc_length = dict(zip((f"p{n:02d}" for n in range(20)), lengths, strict=True))
    sizes = {h.hit_key: (len(h.keys()), h.keys()[0].split(".s")[0]) for h in hits}
    assert sum(size for size, _ in sizes.values()) == sum(lengths)
    assert all(size >= 4 or size == doc_length[doc] for size, doc in sizes.values()), sizes
    assert all(size <= 7 for size, _ in sizes.values())
    gold = [json.loads(line) for line in open(state / "paragraphs" / "gold_nuggets.jsonl", encoding="utf-8")]
    assert gold and {g["item"].split(".s")[0] for g in gold} <= set(doc_length)
