from decimal import Decimal

from campaign import ledger
from campaign.report import build_report, worker_agreement
from campaign.store import AssignmentRow, CampaignRow, JudgmentRow, KVRow, Store


def test_report_has_its_plots_and_escapes_untrusted_text(tmp_path):
    store = Store.open(tmp_path)
    with store.session() as s:
        s.add(CampaignRow(name="c", fingerprint="f", spec_json='{"stages": [{"name": "likert"}]}', budget="5.00"))
        for k in range(6):
            s.add(AssignmentRow(assignment_id=f"A{k}", campaign="c", stage="likert", hit_key="h", hit_id="H",
                                worker_id=f"<W{k % 3}>", status="approved", answer_xml=""))
            for i in range(4):
                s.add(JudgmentRow(campaign="c", stage="likert", assignment_id=f"A{k}", worker_id=f"<W{k % 3}>",
                                  item_key=f"i{i}", value=float(1 + (i + k) % 5)))
            ledger.charge_assignment(s, "c", "h", f"A{k}", Decimal("0.06"), 5)
        s.add(KVRow(campaign="c", key="ranking_batch:r:0000", value='{"mean_sigma": 5.0}'))
    page = build_report(store, "c")
    store.close()
    assert page.count("<svg") == 4
    assert "<W0>" not in page and "&lt;W0&gt;" in page
    assert "$0.42 charged" in page


def test_worker_agreement_by_hand():
    js = [(w, f"i{i}", float(i)) for w in "abd" for i in range(4)] + [("c", f"i{i}", float(3 - i)) for i in range(4)]
    r = worker_agreement(js)
    assert r["a"] > 0 and r["c"] < 0
