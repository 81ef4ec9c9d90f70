"""`campaign budget --set` while the daemon adopts an earlier one (`steps.budget.sync_budget`).

Before: the step read the intent, adopted it, and then wrote "" over the key: a budget set in between
(the command said "the daemon adopts it on its next tick") was lost, and the campaign kept the first."""

from __future__ import annotations

from decimal import Decimal

from campaign.state import Keys
from campaign.steps.budget import sync_budget
from campaign.store import CampaignRow
from tests.support.cli import cli


def _budget(h) -> Decimal:
    with h.ctx.store.session() as s:
        row = s.get(CampaignRow, h.ctx.name)
        return Decimal(row.budget)


def test_a_budget_set_while_the_daemon_adopts_another_is_adopted_next(harness, tmp_path, capsys) -> None:
    h = harness("likert", n_items=10)
    state = str(tmp_path / "state")
    assert cli("budget", h.ctx.name, "--set", "10.00", "--state", state) == 0
    real_get = h.ctx.store.get_kv
    once = {"done": False}

    def get_kv(campaign, key, default=None):
        value = real_get(campaign, key, default)
        if key == Keys.BUDGET_SET and value and not once["done"]:
            once["done"] = True  # the user's second command lands right after the daemon read the first
            assert cli("budget", h.ctx.name, "--set", "20.00", "--state", state) == 0
        return value

    h.ctx.store.get_kv = get_kv
    sync_budget(h.ctx)
    assert _budget(h) == Decimal("10.00")
    assert real_get(h.ctx.name, Keys.BUDGET_SET, "") == "20.00", "the second budget was cleared unseen"
    sync_budget(h.ctx)
    assert _budget(h) == Decimal("20.00") and h.ctx.campaign.budget == Decimal("20.00")
    assert real_get(h.ctx.name, Keys.BUDGET_SET, "") == ""
