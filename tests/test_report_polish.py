"""The report's layout findings: rank ticks, the spend legend, nugget scores binned by the values they
can take, `<br/>` in source texts, the gold-nugget table's widths, and work time and hourly pay per stage
(also in `status --json`). Each assertion failed on the report before these were fixed."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

from campaign.readmodel.figures import campaign_figures
from campaign.report import build_report
from campaign.report_svg import error_bars, lines
from campaign.store import AssignmentRow, CampaignRow, HitRow, ItemRow, JudgmentRow, Store


def _x_tick_labels(svg: str) -> list[str]:
    return re.findall(r'text-anchor="middle">(\d+)</text>', svg)


def test_rank_ticks_are_nice_numbers():
    chart = error_bars([(float(k), 1.0 / k, None) for k in range(1, 21)], xlabel="rank", ylabel="score")
    ranks = [int(v) for v in _x_tick_labels(chart)]
    assert ranks[0] == 1
    rest = ranks[1:]
    step = rest[0]
    assert step in (1, 2, 5, 10) and all(r % step == 0 for r in rest), ranks  # were 1, 2, 5, 7, 10, 12, 15, 17, 20
    chart = error_bars([(float(k), 1.0, None) for k in range(1, 61)], xlabel="rank", ylabel="score")
    assert [int(v) for v in _x_tick_labels(chart)] == [1, 10, 20, 30, 40, 50, 60]


def test_spend_legend_is_clear_of_the_lines():
    chart = lines([("total", "#000", [(1.0, 1.0), (2.0, 3.0)]), ("rewards", "#111", [(1.0, 0.8), (2.0, 2.5)])],
                  xlabel="s", ylabel="$", title="spend")
    legend_y = [float(y) for y in re.findall(r'<text[^>]* y="([\d.]+)"[^>]*>(?:total|rewards)</text>', chart)]
    assert len(legend_y) == 2
    line_y = [float(v) for d in re.findall(r'<path d="([^"]+)"', chart) for v in re.findall(r"V([\d.]+)", d)]
    assert max(legend_y) < min(line_y) - 2, (legend_y, min(line_y))  # the total line reaches the top of the plot


def _nugget_store(tmp_path: Path) -> Store:
    """A finished-looking nugget stage: 7 workers mark each of 8 sentences, sentence k marked by k of them
    (scores 0/7 .. 7/7); texts with UKPConvArg1's literal `<br/>`; timed, approved work at $0.07."""
    store = Store.open(tmp_path)
    spec = {"topic": "t", "stages": [{"name": "nuggets", "kind": "nuggets", "assignments": 7, "reward": "0.07"}],
            "marketplace": "local", "crowd": {"kind": "simulated"}}
    with store.session() as s:
        s.add(CampaignRow(name="n", fingerprint="f", spec_json=json.dumps(spec), budget="5.00"))
        s.add(HitRow(campaign="n", stage="nuggets", hit_key="nuggets-0000", item_keys="[]", annotation="a", token="t",
                     status="closed", reward="0.07", assignments=7))
        for i in range(8):
            s.add(ItemRow(campaign="n", item_key=f"s{i}", text=f"first line {i}<br/>second line <b>bold</b>"))
        for w in range(7):
            aid = f"A{w}"
            # work times 60, 70, ..., 120 s: median 90 s -> $0.07 * 3600 / 90 = $2.80 an hour
            s.add(AssignmentRow(assignment_id=aid, campaign="n", stage="nuggets", hit_key="nuggets-0000", hit_id="H",
                                worker_id=f"W{w}", status="approved", answer_xml="", accept_time=1000.0,
                                submit_time=1060.0 + 10 * w))
            for i in range(8):
                s.add(JudgmentRow(campaign="n", stage="nuggets", assignment_id=aid, worker_id=f"W{w}", item_key=f"s{i}",
                                  value=1.0 if w < i else 0.0))
    return store


def test_nugget_page(tmp_path):
    store = _nugget_store(tmp_path)
    page = build_report(store, "n")
    figures = campaign_figures(store, "n")
    store.close()
    # the score distribution has one bar per k/7 (0, 1/7, ..., 1), each holding exactly one sentence:
    # 0.1-wide bins left some bins empty and put two k/7 values into others
    chart = page[page.index('aria-label="nuggets: score distribution"'):]
    chart = chart[:chart.index("</svg>")]
    bars = re.findall(r"<rect [^>]*><title>[^<]*: (\d+) items</title>", chart)
    assert bars == ["1"] * 8, bars
    # `<br/>` in a source text is a line break; every other tag in it stays escaped text
    assert "&lt;br/&gt;" not in page and "first line 0<br>second line &lt;b&gt;bold&lt;/b&gt;" in page
    assert "<b>bold</b>" not in page
    # median work time and the effective hourly pay at it, in the report and in status --json
    assert "median work time 1 min 30 s, $2.80 an hour" in page
    stage = next(st for st in figures["stages"] if st["name"] == "nuggets")
    assert stage["median_work_seconds"] == 90.0 and stage["hourly_pay"] == "2.80"
    assert Decimal(stage["hourly_pay"]) == Decimal("0.07") * 3600 / 90


def test_gold_nugget_text_takes_the_width(tmp_path):
    store = _nugget_store(tmp_path)
    with store.session() as s:
        row = s.get(CampaignRow, "n")
        assert row is not None
        row.status = "finished"
        s.add(row)
    out = tmp_path / "n"
    out.mkdir()
    (out / "scores.jsonl").write_text(json.dumps({"rank": 1, "item": "s7", "score": 1.0, "n": 7, "sd": 0.0, "text": "x"}) + "\n")
    (out / "gold_nuggets.jsonl").write_text(json.dumps({"item": "s7", "workers": 7, "mace_weight": 2.5,
                                                        "text": "a nugget<br/>over two lines"}) + "\n")
    page = build_report(store, "n", export_dir=out)
    store.close()
    gold = page[page.index("Gold nuggets"):]
    gold = gold[:gold.index("</table>")]
    # the three short columns shrink to their content (1% columns) and the nugget column takes the rest
    assert re.search(r'<col class="fit"><col class="fit"><col class="fit"><col class="nugget">', gold)
    assert re.search(r"table\.gold col\.fit \{ width: 1%; \}", page)
    assert "a nugget<br>over two lines" in gold
