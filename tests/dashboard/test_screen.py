"""The layout on snapshots built by hand: it fills exactly the terminal at 80x24 and 200x50, keeps
campaign names and statuses whole, windows a long campaign list, and shows a batch stage's ranking line."""

from __future__ import annotations

import io
import time
from decimal import Decimal

from rich.console import Console

from campaign.dashboard.screen import UIState, build
from campaign.readmodel.series import Liveness
from campaign.readmodel.snapshot import CampaignView, Snapshot, StageView


def view(name: str, status: str = "running", ranking: bool = False) -> CampaignView:
    stages = [StageView(name="likert", hits_planned=12, hits_posted=12, slots=60, collected=40, reviewed=30,
                        agreement=[0.8] * 10, answers=[4] * 10)]
    if ranking:
        stages.append(StageView(name="ranking", hits_planned=20, hits_posted=20, slots=100, collected=50, reviewed=50, batch=3,
                                pairs=1200, keep=50, precision=0.912))
    return CampaignView(name=name, status=status, budget=Decimal("30.00"), spent=Decimal("3.00"), reserved=Decimal("4.00"),
                        fees=Decimal("0.50"), projected_cost=Decimal("9.00"), answers_per_hour=12.0, spend_per_hour=Decimal("1.20"),
                        finish_at=None, clock_now=0.0, clock_speed=1.0, bucket_seconds=60.0, stages=stages, workers=10,
                        workers_active=set(), workers_excluded=1, workers_blocked=0, labels=200, labels_excluded=10,
                        agreement=0.8, trap_pass_rate=0.9, exclusions=[], events=[], live=Liveness(True, 0.0, "daemon live"),
                        acknowledged=None, alerts=[])


def render(snap: Snapshot, ui: UIState, w: int, h: int) -> list[str]:
    console = Console(file=io.StringIO(), width=w, height=h, color_system=None)
    console.print(build(snap, ui, w, h))
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined]


def test_fills_the_terminal_and_keeps_names_and_statuses_whole():
    long = "a-campaign-name-long-enough-to-need-a-second-line-at-eighty-columns-surely"
    snap = Snapshot(taken_at=time.time(), campaigns=[view("short", "paused"), view(long, "cancelling")], store_url="sqlite://")
    for w, h in ((80, 24), (200, 50)):
        lines = render(snap, UIState(selected=1), w, h)
        assert len(lines) == h and all(len(ln) <= w for ln in lines)
        text = "\n".join(lines)
        assert "  short paused" in text
        joined = "".join(ln.strip() for ln in lines[:8])
        assert long + "cancelling" in joined.replace(" ", "") or f"{long} cancelling" in text
        listing = [ln for ln in lines if "short paused" in ln or long[:20] in ln]
        assert listing and not any("…" in ln for ln in listing)


def test_ranking_stage_line_and_wide_layout():
    snap = Snapshot(taken_at=time.time(), campaigns=[view("two-stage", ranking=True)], store_url="sqlite://")
    text = "\n".join(render(snap, UIState(), 200, 50))
    assert "ranking: batch 3 · 1,200 pairs compared · expected top-50 precision 0.912" in text
    assert "excluded / blocked (newest first)" in text


def test_a_long_campaign_list_is_windowed_around_the_selection():
    snap = Snapshot(taken_at=time.time(), campaigns=[view(f"c{i:02d}") for i in range(20)], store_url="sqlite://")
    lines = render(snap, UIState(selected=12), 80, 24)
    assert len(lines) == 24
    text = "\n".join(lines)
    assert "▶ c12 running" in text and "c00 " not in text
    assert "above" in text and "below" in text


def test_amounts_show_each_campaign_currency_and_are_never_added_across_currencies():
    pounds = view("on-prolific")
    pounds.currency = "GBP"
    snap = Snapshot(taken_at=time.time(), campaigns=[view("on-mturk"), pounds], store_url="sqlite://")
    text = "\n".join(render(snap, UIState(selected=1), 200, 50))
    # the header: one line per currency with that currency's own totals (not $6.00 + ... / $60.00)
    assert "spent $3.00 + reserved $4.00 / budget $30.00" in text
    assert "spent \u00a33.00 + reserved \u00a34.00 / budget \u00a330.00" in text
    assert "$60.00" not in text and "\u00a360.00" not in text
    assert "on-prolific running" in text and "\u00a33.00+\u00a34.00/\u00a330.00" in text
    assert "spend \u00a31.20/h" in text and "final cost \u00a39.00" in text  # the selected campaign's detail
