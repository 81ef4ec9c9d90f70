"""`campaign status --json` reports exactly what the store holds (figures built by hand here)."""

import json
from decimal import Decimal
from pathlib import Path

from campaign import ledger
from campaign.readmodel.figures import collect_figures
from campaign.store import AssignmentRow, CampaignRow, HitRow, Store, WorkerRow
from tests.support.cli import cli_output


def make_store(tmp_path: Path) -> Store:
    store = Store.open(tmp_path)
    with store.session() as s:
        s.add(CampaignRow(name="c1", fingerprint="f", spec_json="{}", budget="5.00"))
        for i, status in enumerate(["closed", "closed", "posted", "posted", "draft"]):
            s.add(HitRow(campaign="c1", stage="likert", hit_key=f"h{i}", item_keys="[]", annotation=f"a{i}", token=f"t{i}",
                         status=status, reward="0.06", assignments=5))
            if status != "draft":
                ledger.reserve_hit(s, "c1", Decimal("5.00"), f"h{i}", Decimal("0.06"), 5)
        for k, status in enumerate(["approved"] * 7 + ["rejected"] * 2 + ["submitted"] * 3):
            hk = f"h{k % 4}"
            s.add(AssignmentRow(assignment_id=f"A{k}", campaign="c1", stage="likert", hit_key=hk, hit_id="H", worker_id=f"W{k % 3}",
                                status=status, answer_xml="", valid=status != "rejected"))
            if status == "approved":
                ledger.charge_assignment(s, "c1", hk, f"A{k}", Decimal("0.06"), 5)
            if status == "rejected":
                ledger.release_assignment(s, "c1", hk, f"A{k}", Decimal("0.06"), 5)
        s.add(WorkerRow(campaign="c1", worker_id="W0", excluded=True, reason="failed 3 of 3 traps"))
    return store


def test_status_json_equals_the_store(tmp_path):
    make_store(tmp_path).close()
    r = cli_output("status", "--json", "--state", str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    (c,) = json.loads(out)["campaigns"]
    assert c["name"] == "c1"
    assert c["hits"] == {"planned": 5, "posted": 4, "assignable": 2, "completed": 2, "failed": 0, "draft": 1}
    assert {k: c["assignments"][k] for k in ("submitted", "approved", "rejected")} == {"submitted": 12, "approved": 7, "rejected": 2}
    # 4 HITs x $0.35 reserved; 7 charged at $0.07 (fee 0.01 each); 2 released at $0.07
    assert c["money"] == {"spent": "0.49", "reserved": "0.77", "fees": "0.07", "budget": "5.00", "remaining": "3.74",
                          "projected": "1.61"}  # 0.49 + 0.07 x (25 planned slots - 9 decided)
    assert c["quality"]["workers_excluded"] == 1
    assert c["quality"]["worst_workers"][0]["reason"] == "failed 3 of 3 traps"


def test_status_table_renders_the_same_numbers(tmp_path):
    store = make_store(tmp_path)
    figures = collect_figures(store)
    store.close()
    r = cli_output("status", "--state", str(tmp_path), COLUMNS="200")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    m = figures["campaigns"][0]["money"]
    for figure in (f"${m['spent']}", f"${m['reserved']}", f"${m['budget']}", "4/2/2", "12/7/2"):
        assert figure in out, figure
