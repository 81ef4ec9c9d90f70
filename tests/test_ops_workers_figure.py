"""`campaign workers` on a nugget campaign shows the quality figure its evidence has (MACE competence)
and says why there is no r, where it used to print an empty r column."""

from __future__ import annotations

import json

from campaign.readmodel.definitions import worker_figure
from campaign.store import CampaignRow, Store, WorkerRow
from tests.support.cli import cli_output


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
    out = cli_output("workers", "n", "--state", tmp_path, COLUMNS="80").stdout
    assert "MACE" in out and "0.64" in out and "0.44" in out and "no r" in out, out
