"""`campaign workers` on a nugget campaign shows the quality figure its evidence has (MACE competence)
and says why there is no r, where it used to print an empty r column."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from campaign.dashboard.definitions import worker_figure
from campaign.store import CampaignRow, Store, WorkerRow

ROOT = Path(__file__).resolve().parent.parent


def test_worker_figure_follows_the_evidence():
    assert worker_figure([{"correlation": 0.5}, None])[:2] == ("correlation", "r")
    key, head, note = worker_figure([{"competence": 0.64}, {}])
    assert (key, head) == ("competence", "MACE") and "no r" in note
    assert "none yet" in worker_figure([{}, None])[2]


def test_nugget_workers_view_has_a_filled_column(tmp_path):
    store = Store.open(tmp_path)
    with store.session() as s:
        s.add(CampaignRow(name="n", fingerprint="f", spec_json=json.dumps({"stages": [{"name": "nuggets", "kind": "nuggets"}]}),
                          budget="5.00"))
        for w, c in (("W1", 0.6404), ("W2", 0.4429)):
            s.add(WorkerRow(campaign="n", worker_id=w, assignments=3, evidence=json.dumps({"competence": c})))
    store.close()
    out = subprocess.run([sys.executable, "-m", "campaign", "workers", "n", "--state", str(tmp_path)], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}, timeout=60).stdout
    assert "MACE" in out and "0.64" in out and "0.44" in out and "no r" in out, out
