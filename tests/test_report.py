"""`campaign report`: the figures behind the page, checked by hand, and the page's content on stores built
to provoke the old defects (nugget scores binned on the Likert scale, excluded workers left out of the
agreement chart, one batch giving an empty plot, untrusted text)."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import pytest

from campaign import ledger
from campaign.report import (
    build_report,
    fleiss_modal,
    is_ranking,
    kendall_w,
    score_scale,
    spend_series,
    worker_agreement,
)
from campaign.report_svg import Bar, _count_axis, fmt_tick, histogram, nice_step, ticks, vbars
from campaign.state import Keys
from campaign.store import AssignmentRow, CampaignRow, ItemRow, JudgmentRow, KVRow, Store, WorkerRow
from tests.support.paths import ROOT


def test_worker_agreement_by_hand():
    js = [(w, f"i{i}", float(i)) for w in "abd" for i in range(4)] + [("c", f"i{i}", float(3 - i)) for i in range(4)]
    r = worker_agreement(js)
    assert r["a"] > 0 and r["c"] < 0
    # a: labels 0..3 vs the others' means (0+0+3)/3.. -> perfectly linear, r = 1
    assert r["a"] == pytest.approx(1.0)


def test_kendall_w_and_ranking_detection():
    assert kendall_w([[1, 2, 3], [1, 2, 3], [1, 2, 3]]) == pytest.approx(1.0)
    assert kendall_w([[1, 2, 3], [3, 2, 1]]) == pytest.approx(0.0)
    # m=2, n=3: rank sums (3, 3, 6)? [1,2,3] + [2,1,3] = (3,3,6); S = 1+1+4 = 6; W = 12*6 / (4*24) = 0.75
    assert kendall_w([[1, 2, 3], [2, 1, 3]]) == pytest.approx(0.75)
    assert is_ranking({"a1": [2.0, 1.0, 3.0], "a2": [1.0, 2.0]})
    assert not is_ranking({"a1": [1.0, 1.0, 3.0]})  # ratings, not an order
    assert not is_ranking({"a1": [0.0, 1.0]})


def test_fleiss_modal_uses_the_common_rater_count():
    units = {"x": [1.0, 1.0, 1.0], "y": [2.0, 2.0, 2.0], "z": [1.0, 2.0], "w": [1.0, 2.0, 2.0]}
    fk = fleiss_modal(units)
    assert fk is not None and fk["raters"] == 3 and fk["units"] == 3 and fk["of_units"] == 4
    # by hand: P_i = 1, 1, 1/3 -> P-bar 7/9; p = (4/9, 5/9) -> P_e = 41/81; kappa = (7/9 - 41/81) / (1 - 41/81) = 22/40
    assert fk["kappa"] == pytest.approx(22 / 40)


def test_nugget_scores_are_binned_on_their_own_scale():
    rows = [{"rank": k, "item": f"s{k}", "score": 0.0, "n": 7, "sd": 0.0} for k in range(17)]
    rows += [{"rank": 17 + k, "item": f"t{k}", "score": 1.0, "n": 7, "sd": 0.0} for k in range(5)]
    lo, hi, step, own = score_scale(rows, [0.0, 1.0, 1.0, 0.0])
    assert (lo, hi, own) == (0.0, 1.0, True) and step == pytest.approx(0.1)
    chart = histogram([r["score"] for r in rows], lo, hi, step, xlabel="score")
    assert "<title>[0.0, 0.1): 17 items</title>" in chart
    assert "<title>[0.9, 1.0]: 5 items</title>" in chart
    likert = [{"score": s, "n": 5, "sd": 1.0} for s in (1.0, 2.2, 5.0)]
    assert score_scale(likert, [1.0, 3.0, 5.0])[:2] == (1.0, 5.0)
    # scores that are not means of labels (no n/sd) get a range around the data, zero included when crossed
    bt = [{"score": s, "uncertainty": 0.4} for s in (-2.7, 0.1, 3.03)]
    lo, hi, step, own = score_scale(bt, [1.0, 5.0])
    assert not own and lo <= -2.7 and hi >= 3.03


def test_ticks_are_nice_and_include_zero():
    assert nice_step(4, 10) == 0.5 and nice_step(1, 10) == 0.1 and nice_step(7, 5) == 2.0
    assert ticks(-1, 1, 0.5) == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert [fmt_tick(v, 0.25) for v in ticks(0, 0.5, 0.25)] == ["0.00", "0.25", "0.50"]
    hi, yt = _count_axis(7)
    assert yt[0] == 0 and hi >= 7 and all(float(t).is_integer() for t in yt)


def test_one_batch_still_gives_a_readable_bar():
    chart = vbars([Bar("batch 1", 2.73)], xlabel="adaptive batch", ylabel="mean TrueSkill σ", title="u")
    assert chart.count("<rect x=") == 1
    assert ">2.73<" in chart and ">batch 1<" in chart and ">0<" in chart and "mean TrueSkill σ" in chart


def test_spend_series_splits_rewards_fees_and_bonuses_exactly():
    charges = [(10.0, "charge", "0.07", "0.01"), (5.0, "charge", "0.07", "0.01"), (20.0, "bonus_charge", "0.12", "0.02")]
    s = spend_series(charges, start=0.0)
    assert s["rewards"][-1] == (20.0, Decimal("0.12"))
    assert s["fees"][-1][1] == Decimal("0.04") and s["bonuses"][-1][1] == Decimal("0.10")
    assert s["total"][-1][1] == Decimal("0.26") and [t for t, _ in s["total"]] == [5.0, 10.0, 20.0]


def _store(tmp_path: Path) -> Store:
    """A finished-looking Likert campaign: workers W0..W3 agree, EXCL (excluded) and BLK (blocked) do not."""
    store = Store.open(tmp_path)
    spec = {"topic": "Plastic <bottles>", "stages": [{"name": "likert", "kind": "likert"}], "marketplace": "local",
            "crowd": {"kind": "simulated"}}
    with store.session() as s:
        s.add(CampaignRow(name="c", fingerprint="f", spec_json=json.dumps(spec), budget="5.00"))
        for i in range(6):
            s.add(ItemRow(campaign="c", item_key=f"i{i}", text=f"statement {i} <script>alert(1)</script>"))
        workers = {"W0": 0, "W1": 0, "W2": 1, "<W3>": 0, "EXCL": None, "BLK": None}
        for k, (w, shift) in enumerate(workers.items()):
            aid = f"A{k}"
            s.add(AssignmentRow(assignment_id=aid, campaign="c", stage="likert", hit_key="likert-0000", hit_id="H",
                                worker_id=w, status="approved" if w != "BLK" else "rejected", answer_xml="",
                                feedback="Thank you for your work. We could not accept this assignment: always 3. The task asks..."
                                if w == "BLK" else None))
            for i in range(6):
                value = float(1 + (i + shift) % 5) if shift is not None else float(5 - i % 5) if w == "EXCL" else 3.0
                s.add(JudgmentRow(campaign="c", stage="likert", assignment_id=aid, worker_id=w, item_key=f"i{i}", value=value,
                                  excluded=w in ("EXCL", "BLK")))
            if w != "BLK":
                ledger.charge_assignment(s, "c", "likert-0000", aid, Decimal("0.06"), 5)
        ev = {"stages": {"likert": {"excluded": True, "correlation": -0.9, "reason": "ratings against the crowd's"}}}
        s.add(WorkerRow(campaign="c", worker_id="EXCL", excluded=True, reason="likert: ratings against the crowd's",
                        evidence=json.dumps(ev)))
        s.add(WorkerRow(campaign="c", worker_id="BLK", excluded=True, blocked=True, reason="constant answers, traps failed"))
        for w in ("W0", "W1", "W2", "<W3>"):
            s.add(WorkerRow(campaign="c", worker_id=w))
        ledger.reserve_bonus(s, "c", Decimal("5.00"), "bonus:W0", Decimal("0.10"), "A0")
        ledger.charge_bonus(s, "c", "bonus:W0", Decimal("0.10"), "A0")
        s.add(KVRow(campaign="c", key=Keys.batch_progress("likert", "likert", 0), value='{"mean_sigma": 2.5, "pairs_planned": 12}'))
    return store


def test_report_page_content(tmp_path):
    store = _store(tmp_path)
    page = build_report(store, "c")
    store.close()
    # untrusted text escaped everywhere
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<W3>" not in page and "&lt;W3&gt;" in page and "Plastic &lt;bottles&gt;" in page
    # results table: every item ranked, with score and n
    table = page[page.index('<table class="results">'):]
    table = table[:table.index("</table>")]
    assert table.count("<tr>") == 1 + 6
    assert re.search(r"<th class=\"num\">n</th>", table) and re.search(r"<th class=\"num\">score</th>", table)
    # agreement per worker: excluded and blocked workers drawn, marked, the worst named
    chart = page[page.index('aria-label="likert: agreement per worker"'):]
    chart = chart[:chart.index("</svg>")]
    assert ">EXCL<" in chart and ">BLK<" in chart and ">excluded<" in chart and ">blocked<" in chart
    assert re.search(r"Lowest agreement: <code>EXCL</code> \(r = -0\.9\d over 6 labels\) <span class=\"tag excluded\">", page)
    assert "Fleiss" in page
    # quality control: excluded and blocked workers with reasons, rejected work with its reason
    qc = page[page.index('id="quality"'):page.index('id="spend"')]
    assert "ratings against the crowd&#39;s" in qc and "constant answers, traps failed" in qc and "always 3" in qc
    assert re.search(r"<td>likert</td><td class=\"num\">5</td><td class=\"num\">1</td>", qc)
    assert "1 bonus paid ($0.10)" in qc  # the bonus itself; its fee counts with the fees
    # spend split: 5 charges of $0.06 + 20% fee = $0.07 each: rewards $0.30, fees $0.05 (+ $0.02 on the bonus)
    spend = page[page.index('id="spend"'):]
    for label, value in (("rewards", "$0.30"), ("marketplace fees", "$0.07"), ("bonuses", "$0.10"), ("total spent", "$0.47")):
        assert f"<td>{label}</td><td class=\"num\">{value}</td>" in spend, label
    # one batch: a bar with its value, not an empty plot
    assert "Ranking uncertainty per batch" in page and ">2.50<" in page and "1 batch:" in page
    # every chart has two axis titles; counts, money and correlations start from (or cross) zero; scores on the
    # labels' own 1..5 scale have no zero to show
    charts = re.findall(r"<svg.*?</svg>", page, flags=re.S)
    assert len(charts) == 5
    for svg in charts:
        assert svg.count('font-size="12"') >= 2, svg[:200]
        if "scores by rank" not in svg:
            assert re.search(r">\$?0(\.0+)?<", svg), svg[:200]


def _finished_with_export(tmp_path, rows: list[dict]) -> str:
    """The report of the test store's campaign, finished, whose last stage's final export holds `rows`."""
    store = _store(tmp_path)
    with store.session() as s:
        row = s.get(CampaignRow, "c")
        row.status = "finished"
        s.add(row)
    out = tmp_path / "c"
    out.mkdir()
    (out / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    page = build_report(store, "c", export_dir=out)
    store.close()
    return page


def test_report_reads_the_final_export_for_the_last_stage(tmp_path):
    page = _finished_with_export(tmp_path, [
        {"rank": 1, "item": "i9", "score": 1.5, "uncertainty": 0.25, "comparisons": 12, "text": "final <b>"},
        {"rank": 2, "item": "i8", "score": None, "uncertainty": None, "comparisons": 0, "text": "unranked"}])
    assert "final export (scores.jsonl)" in page and "final &lt;b&gt;" in page
    assert "<th class=\"num\">± SE</th>" in page and ">0.250<" in page
    assert "1 item has no score in this stage" in page


def test_a_ranking_export_with_its_comparisons_own_scores_says_which_is_which(tmp_path):
    page = _finished_with_export(tmp_path, [{"rank": 1, "item": "i9", "score": 1.2, "uncertainty": 0.4, "comparisons": 12,
                                             "text": "t", "comparison_score": 1.5, "comparison_uncertainty": 0.7}])
    assert "<th class=\"num\">comparisons&#39; score</th>" in page and ">1.500<" in page and ">0.700<" in page
    assert "adds the earlier stage's evidence" in page


def test_no_task_kind_checks_in_the_report():
    for path in (ROOT / "campaign" / "report.py", ROOT / "campaign" / "report_svg.py"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"['\"](likert|ranking|nuggets)['\"]", text), path


def test_template_is_packaged():
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    data = cfg["tool"]["setuptools"]["package-data"]["campaign"]
    assert any(p.startswith("report_templates/") for p in data)
    assert (ROOT / "campaign" / "report_templates" / "report.html.j2").is_file()
    assert any(d.lower().startswith("jinja2") for d in cfg["project"]["dependencies"])


def test_a_running_two_stage_campaign_shows_both_stages(tmp_path):
    store = _store(tmp_path)
    with store.session() as s:
        row = s.get(CampaignRow, "c")
        spec = json.loads(row.spec_json)
        spec["stages"].append({"name": "ranking", "kind": "ranking"})
        row.spec_json = json.dumps(spec)
        s.add(row)
    page = build_report(store, "c", export_dir=tmp_path / "c")
    store.close()
    assert 'id="stage-likert"' in page and 'id="stage-ranking"' in page
    ranking = page[page.index('id="stage-ranking"'):page.index('id="quality"')]
    assert "0 answers approved" in ranking
    likert = page[page.index('id="stage-likert"'):page.index('id="stage-ranking"')]
    assert "computed from the store now" in likert and "Results: 6 items, ranked" in likert


def test_krippendorff_alpha_is_shown_where_the_metrics_module_has_it(tmp_path, monkeypatch):
    import campaign.report as report

    seen: list[list[tuple]] = []

    def categorical(triples):
        seen.append(list(triples))
        return {"items_with_two_or_more": 6, "categories": 5, "percent_agreement": 0.5, "fleiss_kappa": 0.25,
                "krippendorff_alpha": 0.2625}

    monkeypatch.setattr(report, "_CATEGORICAL", categorical)
    store = _store(tmp_path)
    page = build_report(store, "c")
    store.close()
    assert "Krippendorff&#39;s α (nominal)</td><td class=\"num\">0.263</td>" in page
    assert "Fleiss&#39; κ</td><td class=\"num\">0.250</td>" in page
    # (unit, worker, label) triples, traps left out; all answers first (36 labels), then those kept (24)
    assert [len(t) for t in seen] == [36, 24] and seen[0][0][1] in {"W0", "W1", "W2", "<W3>", "EXCL", "BLK"}


def test_a_campaign_with_nothing_collected_yet(tmp_path):
    store = Store.open(tmp_path)
    with store.session() as s:
        s.add(CampaignRow(name="new", fingerprint="f", budget="5.00",
                          spec_json=json.dumps({"stages": [{"name": "likert", "kind": "likert"}]})))
    page = build_report(store, "new")
    store.close()
    assert "Results: no item scored yet" in page and "Not enough overlapping labels" in page
    assert "<td>total spent</td><td class=\"num\">$0.00</td>" in page
    assert "Nothing charged yet" in page and "spend over time" not in page  # no empty chart on a 0-1 axis
