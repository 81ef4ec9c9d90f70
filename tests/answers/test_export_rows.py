"""The answers export's rows from a hand-made store: what `kept` means, times, and text that cannot
break a row."""

from __future__ import annotations

import csv
import io
import json

from campaign.answers.export import COLUMNS, answer_rows, render
from campaign.store import AssignmentRow, CampaignRow, JudgmentRow, Store
from tests.support.cli import cli

SPEC = {"stages": [{"name": "likert", "kind": "likert"}, {"name": "ranking", "kind": "ranking"}]}


def build(state) -> None:
    store = Store.open(state)
    with store.session() as s:
        s.add(CampaignRow(name="c", fingerprint="f", spec_json=json.dumps(SPEC)))
        cases = [  # assignment, hit, status, item, value, excluded
            ("A1", "likert-00000", "approved", "p1", 4.0, False),
            ("A1", "likert-00000", "approved", "trap:likert:0", 1.0, False),
            ("A2", "likert-00000", "rejected", "p1", 2.0, False),
            ("A3", "likert-00000", "approved", "p1", 5.0, True),
            ("A4", "repeat:likert-00000", "approved", "p1", 3.0, False),
            ("A5", "likert-00001", "submitted", "odd\tkey\nhere", 3.0, False),
        ]
        for aid, hit, status, item, value, excluded in cases:
            if s.get(AssignmentRow, aid) is None:
                s.add(AssignmentRow(assignment_id=aid, campaign="c", stage="likert", hit_key=hit, hit_id="H", worker_id=f"W{aid}",
                                    status=status, answer_xml="", accept_time=1_700_000_000.0, submit_time=1_700_000_042.25))
                s.flush()
            s.add(JudgmentRow(campaign="c", stage="likert", assignment_id=aid, worker_id=f"W{aid}", item_key=item, value=value,
                              excluded=excluded))
        s.add(AssignmentRow(assignment_id="R1", campaign="c", stage="ranking", hit_key="ranking-00000", hit_id="H2",
                            worker_id="WA1", status="approved", answer_xml=""))
        s.add(JudgmentRow(campaign="c", stage="ranking", assignment_id="R1", worker_id="WA1", item_key="p1", value=2.0))
    store.close()


def test_kept_is_approved_not_excluded_not_a_trap_not_a_repeat(tmp_path):
    build(tmp_path)
    store = Store.open(tmp_path)
    rows = list(answer_rows(store, "c", raw_ids=True))
    store.close()
    kept = {(r["assignment"], r["item"]): r["kept"] for r in rows}
    assert kept == {("A1", "p1"): True, ("A1", "trap:likert:0"): False, ("A2", "p1"): False, ("A3", "p1"): False,
                    ("A4", "p1"): False, ("A5", "odd\tkey\nhere"): False, ("R1", "p1"): True}
    first = rows[0]
    assert first["submitted_at"] == "2023-11-14T22:14:02Z" and first["seconds"] == 42.2
    assert [r["stage"] for r in rows][-1] == "ranking" and rows[-1]["label"] == 2 and rows[-1]["seconds"] is None
    assert all(set(r) == set(COLUMNS) for r in rows)


def test_tsv_keeps_one_line_per_row_and_jsonl_is_strict(tmp_path, capsys):
    build(tmp_path)
    store = Store.open(tmp_path)
    rows = list(answer_rows(store, "c"))
    store.close()
    text = "".join(render(iter(rows), "tsv"))
    assert text.count("\n") == len(rows) + 1
    parsed = list(csv.DictReader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE))
    odd = next(r for r in parsed if r["assignment"] == "A5")
    assert odd["item"] == "odd key here" and odd["kept"] == "false"
    assert cli("export", "c", "--answers", "--format", "jsonl", "--state", str(tmp_path)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert next(json.loads(x)["item"] for x in lines if '"A5"' in x) == "odd\tkey\nhere"  # JSON keeps the text as it is
    assert cli("export", "c", "--format", "tsv", "--state", str(tmp_path)) == 2  # scores are csv or jsonl
    assert cli("export", "c", "--raw-ids", "--state", str(tmp_path)) == 2
