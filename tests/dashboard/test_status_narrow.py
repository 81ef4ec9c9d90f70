"""`campaign status` at 80 columns on a real terminal (nothing in campaign or status cut to an ellipsis),
and in an empty folder (says so, exits 2, creates nothing)."""

from __future__ import annotations

from campaign.store import CampaignRow, Store
from tests.dashboard.test_status import make_store
from tests.support.cli import cli_output
from tests.support.terminal import Term

LONG = "water-bottles-second-round-with-traps"


def test_status_at_80_columns_keeps_campaigns_and_statuses_whole(tmp_path):
    store = make_store(tmp_path)
    with store.session() as s:
        s.add(CampaignRow(name=LONG, fingerprint="g", spec_json="{}", budget="12.00", status="cancelling"))
    store.close()
    term = Term(["status", "--state", str(tmp_path)], cols=80, rows=60)
    try:
        assert term.wait_exit(120) == 0
    finally:
        term.close()
    lines = term.lines()
    assert all(len(ln) <= 80 for ln in lines)
    heads = {ln.split()[0]: ln.split()[1] for ln in lines if ln and ln.split()[0] in ("c1", LONG)}
    assert heads == {"c1": "running", LONG: "cancelling"}
    block = [ln for ln in lines if ln.startswith(("c1 ", LONG)) or ln.startswith("  HITs") or ln.startswith("  spent")]
    assert len(block) == 6 and not any("…" in ln or "..." in ln for ln in block)
    assert "  HITs 4/2/2 posted/assignable/done · answers 12/7/2 sub/appr/rej" in lines
    assert any(ln.startswith("  spent $0.49 · reserved $0.77 · fees $0.07 · budget $5.00") for ln in lines)


def test_status_in_an_empty_folder_creates_nothing(tmp_path):
    for args in (["status"], ["status", "--json"], ["dashboard"], ["status", "--state", "elsewhere"]):
        r = cli_output(*args, cwd=tmp_path)
        assert r.returncode == 2, (args, r.stderr)
        assert "no campaign store at" in r.stderr
        assert list(tmp_path.iterdir()) == [], f"{args} left {list(tmp_path.iterdir())}"


def test_status_still_reads_an_existing_store(tmp_path):
    make_store(tmp_path).close()
    r = cli_output("status", "--json", "--state", str(tmp_path))
    assert r.returncode == 0 and '"name": "c1"' in r.stdout
    Store.open(tmp_path).close()
