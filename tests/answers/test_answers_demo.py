"""After the demo: the answers export gives every score and gold nugget back, `campaign aggregate` reads
it as it is, and `campaign forget` on the demo store keeps the books to the cent."""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
import subprocess
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest
from sqlmodel import select

from campaign.aggregate.gold_nuggets import SpanVote, gold_nuggets
from campaign.answers.export import COLUMNS
from campaign.ledger import totals
from campaign.store import CampaignRow, LedgerRow, Store
from tests.support.cli import run_args, run_campaign
from tests.support.paths import ROOT


def campaign(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_campaign(*args, cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """The folder the demo ran in (its store under `state/`)."""
    here = tmp_path_factory.mktemp("demo")
    proc = run_campaign(*run_args(ROOT / "campaigns.yaml", here / "state"), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return here


def read_tsv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert rows and list(rows[0]) == list(COLUMNS)
    return rows


@pytest.mark.slow
def test_likert_scores_come_back_from_the_kept_rows_and_aggregate_reads_the_file(demo):
    out = campaign("export", "water-bottles", "--answers", "--format", "tsv", "--out", "answers.tsv", cwd=demo)
    assert out.returncode == 0, out.stderr
    rows = read_tsv(demo / "answers.tsv")
    by_item: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        if r["kept"] == "true":
            assert r["status"] == "approved" and r["excluded"] == "false" and r["trap"] == "false"
            by_item[r["item"]].append(int(r["label"]))
    assert any(r["kept"] == "false" for r in rows)  # quality control's exclusions are in the file, marked
    scores = campaign("export", "water-bottles", cwd=demo)
    assert scores.returncode == 0, scores.stderr
    exported = {r["item"]: r for r in csv.DictReader(scores.stdout.splitlines())}
    assert set(exported) == set(by_item)
    for item, labels in by_item.items():
        assert len(labels) == int(exported[item]["n"])
        assert abs(sum(labels) / len(labels) - float(exported[item]["score"])) < 5e-7, item
    # people are pseudonyms here, real ids only with --raw-ids
    store = Store.open(demo / "state")
    with store.session() as s:
        real = {w for (w,) in s.connection().exec_driver_sql("SELECT worker_id FROM workers WHERE campaign='water-bottles'")}
    store.close()
    assert not real & {r["worker"] for r in rows} and len({r["worker"] for r in rows}) == len(real)
    raw = campaign("export", "water-bottles", "--answers", "--raw-ids", cwd=demo)
    assert {r["worker"] for r in csv.DictReader(raw.stdout.splitlines(), delimiter="\t")} == real
    import pandas as pd  # the way docs/answers-export.md loads it

    frame = pd.read_csv(demo / "answers.tsv", sep="\t")
    means = frame[frame["kept"]].groupby("item")["label"].mean()
    assert {k: round(v, 6) for k, v in means.items()} == {k: float(r["score"]) for k, r in exported.items()}
    agg = campaign("aggregate", "answers.tsv", "--json", cwd=demo)
    assert agg.returncode == 0, agg.stderr
    result = json.loads(agg.stdout, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    assert set(result["items"]) == set(by_item) and result["labels"] == sum(map(len, by_item.values()))


@pytest.mark.slow
def test_nugget_export_gives_the_gold_nuggets_back(demo):
    out = campaign("export", "water-nuggets", "--answers", "--out", "nuggets.tsv", cwd=demo)
    assert out.returncode == 0, out.stderr
    rows = read_tsv(demo / "nuggets.tsv")
    workers: dict[tuple[str, str, int, int], set[str]] = defaultdict(set)
    votes = []
    for r in rows:
        if r["kept"] == "true" and r["label"] == "1":
            first, last = int(r["first"]), int(r["last"])
            workers[(r["hit"], r["item"], first, last)].add(r["worker"])
            votes.append(SpanVote(hit=(r["hit"], r["item"]), worker=r["worker"], start=first, end=last + 1, tokens=last - first + 1))
        elif r["label"] == "0":
            assert r["first"] == r["last"] == ""
    found = [{"hit": g.hit[0], "item": g.hit[1], "first": g.start, "last": g.end - 1, "workers": g.workers}
             for g in gold_nuggets(votes, min_workers=3, min_tokens=3)]
    gold = [json.loads(line) for line in (demo / "state" / "water-nuggets" / "gold_nuggets.jsonl").read_text().splitlines()]
    assert gold and found == [{k: g[k] for k in ("hit", "item", "first", "last", "workers")} for g in gold]
    for g in gold:  # the count, straight from the file
        assert len(workers[(g["hit"], g["item"], g["first"], g["last"])]) == g["workers"]
    scores = {r["item"]: r for r in csv.DictReader(campaign("export", "water-nuggets", cwd=demo).stdout.splitlines())}
    marked: dict[str, dict[str, int]] = defaultdict(dict)
    for r in rows:
        if r["kept"] == "true":
            key = r["assignment"]
            marked[r["item"]][key] = max(marked[r["item"]].get(key, 0), int(r["label"]))
    for item, by_answer in marked.items():
        assert abs(sum(by_answer.values()) / len(by_answer) - float(scores[item]["score"])) < 5e-7, item
    jsonl = campaign("export", "water-nuggets", "--answers", "--format", "jsonl", cwd=demo)
    parsed = [json.loads(line, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}")) for line in jsonl.stdout.splitlines()]
    assert len(parsed) == len(rows) and all(isinstance(p["kept"], bool) for p in parsed)


@pytest.mark.slow
def test_forget_on_the_demo_store_keeps_every_total(demo, tmp_path):
    state = tmp_path / "state"
    shutil.copytree(demo / "state", state)
    con = sqlite3.connect(state / "campaign.db")
    who = con.execute("SELECT worker_id FROM assignments WHERE campaign='water-nuggets' ORDER BY assignment_id").fetchone()[0]
    con.close()

    def books() -> dict:
        store = Store.open(state)
        with store.session() as s:
            out = {c.name: totals(s, c.name, Decimal(c.budget)) for c in s.exec(select(CampaignRow)).all()}
            out["rows"] = sorted((r.campaign, r.kind, r.amount, r.fee, r.assignment_id) for r in s.exec(select(LedgerRow)).all())
        store.close()
        return out

    before = books()
    assert before["water-nuggets"].spent > 0
    proc = campaign("forget", who, "--state", str(state), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert books() == before
    dump = "\n".join(sqlite3.connect(state / "campaign.db").iterdump())
    assert who not in dump and all(who.encode() not in p.read_bytes() for p in state.glob("campaign.db*"))
    assert "market" in proc.stderr  # the built-in marketplace's own records are named, not silently kept
    rows = campaign("export", "water-nuggets", "--answers", "--raw-ids", "--state", str(state), cwd=tmp_path).stdout
    assert who not in rows and "forgotten-" in rows
