"""A campaign whose budget runs out: the posted work is finished, scores are written over it, the
campaign ends `budget_exhausted` with one event, and `campaign budget NAME --set` lets it go on."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from sqlmodel import select

from campaign.store import CampaignRow, EventRow, HitRow, Store
from tests.support.cli import run_campaign
from tests.support.specs import campaign, first_propositions, simulated
from tests.support.specs import write_spec as write_campaigns


def write_spec(tmp: Path, n_items: int = 30) -> Path:
    task = {"kind": "likert", "items_per_hit": 5, "assignments": 5, "reward": "0.06", "auto_approval_delay": "2d"}
    return write_campaigns(tmp / "campaigns.yaml", campaign("tight", task=task, budget="1.00", propositions=first_propositions(tmp, n_items),
                                                            crowd=simulated(25, speed=3600, arrival_span="30m")))


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_campaign(*args, timeout=timeout)


def facts(state: Path) -> tuple[str, str, list[EventRow], list[HitRow]]:
    store = Store.open(state)
    try:
        with store.session() as s:
            row = s.get(CampaignRow, "tight")
            assert row is not None
            events = list(s.exec(select(EventRow).where(EventRow.campaign == "tight")).all())
            hits = list(s.exec(select(HitRow).where(HitRow.campaign == "tight")).all())
            return row.status, row.budget, events, hits
    finally:
        store.close()


@pytest.mark.slow
def test_budget_runs_out_then_is_raised(tmp_path):
    cfg, state = write_spec(tmp_path), tmp_path / "state"
    first = cli("run", "--config", str(cfg), "--state", str(state), "--quiet", "--max-seconds", "60")
    assert first.returncode == 0, first.stderr  # the old daemon never stopped: exit 3 at --max-seconds
    status, _, events, hits = facts(state)
    assert status == "budget_exhausted"
    posted = [h for h in hits if h.hit_id is not None]
    assert 0 < len(posted) < len(hits)  # 2 of 6 HITs fit in $1.00
    assert all(h.status == "closed" for h in posted)  # the posted work was finished
    kinds = [e.kind for e in events]
    assert kinds.count("budget_exhausted") == 1
    assert kinds.count("budget_stop") <= 1  # was one per tick
    scores = state / "tight" / "scores.csv"
    assert scores.is_file()
    rows = scores.read_text(encoding="utf-8").splitlines()
    assert 1 < len(rows) <= 1 + 5 * len(posted)  # the items that were rated, not all 30
    assert "budget_exhausted" in first.stdout + first.stderr

    shown = cli("status", "--state", str(state), "--json")
    assert shown.returncode == 0, shown.stderr
    assert "budget_exhausted" in shown.stdout

    low = cli("budget", "tight", "--set", "0.50", "--state", str(state))
    assert low.returncode == 2 and "committed" in low.stderr  # below what is already spent
    bad = cli("budget", "nosuch", "--set", "50.00", "--state", str(state))
    assert bad.returncode == 2
    raised = cli("budget", "tight", "--set", "50.00", "--state", str(state))
    assert raised.returncode == 0, raised.stderr
    assert facts(state)[0] == "budget_exhausted"  # an intent: the daemon applies it

    second = cli("run", "--config", str(cfg), "--state", str(state), "--quiet", "--max-seconds", "90")
    assert second.returncode == 0, second.stderr
    status, budget, events, hits = facts(state)
    assert status == "finished" and budget == "50.00"
    assert all(h.status == "closed" for h in hits)
    assert [e.kind for e in events].count("budget_raised") == 1
    assert len(scores.read_text(encoding="utf-8").splitlines()) == 31
    data = json.loads(cli("events", "tight", "--state", str(state), "--json", "--limit", "500").stdout)
    assert [e["kind"] for e in data].count("budget_exhausted") == 1
