"""Shared by the Prolific tests: which service they run against, and the handle they get."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest

from campaign.clock import ManualClock
from campaign.market.prolific_site import ProlificDoor
from campaign.market.server import RunningMarket, start_market
from campaign.marketplaces import open_marketplace
from campaign.marketplaces.base import HitType
from campaign.marketplaces.prolific import ProlificMarketplace
from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.server import RunningEmulator, start_emulator
from campaign.prolific.studies import ProlificStudies
from campaign.prolific.study import ProlificConfig
from campaign.spec import Qualifications

LIVE = bool(os.environ.get("PROLIFIC_TOKEN")) and os.environ.get("CAMPAIGN_PROLIFIC_LIVE") == "1"


@dataclass
class Api:
    client: ProlificClient
    emulator: RunningEmulator | None
    clock: ManualClock | None

    def need_emulator(self) -> RunningEmulator:
        if self.emulator is None:
            pytest.skip("needs simulated participants, which only the emulator has (running against real Prolific)")
        return self.emulator


@dataclass
class Stack:
    """The Prolific road in one process: emulator, built-in marketplace with the door on its task site,
    the journal and the adapter over them (what `campaign.prolific.runtime` builds for a run)."""

    clock: ManualClock
    em: RunningEmulator
    server: RunningMarket
    api: ProlificClient
    door: ProlificDoor
    studies: ProlificStudies
    market: ProlificMarketplace
    cfg: ProlificConfig


@contextmanager
def adapter_stack(tmp: Path, configure: Callable[[str, ProlificClient], ProlificConfig]) -> Iterator[Stack]:
    """`configure(task site URL, API client)` gives the campaign's Prolific settings (it may make groups)."""
    clock = ManualClock()
    em = start_emulator(tmp / "em", clock, fee_rate=Decimal("0.3"))
    server = start_market(tmp / "market", clock=clock, mode="prod", balance=Decimal("100.00"))
    api = ProlificClient(em.base_url, em.token, max_retries=0)
    door = ProlificDoor(server.engine, server.core.site.config, tmp / "site", api, ttl=0)
    server.core.site.prolific = door
    cfg = configure(server.endpoint_url, api)
    studies = ProlificStudies(api, tmp / "journal")
    inner = open_marketplace("local", server.endpoint_url, credentials=server.credentials)
    market = ProlificMarketplace(inner, studies, door, cfg, tmp / "adapter")
    try:
        yield Stack(clock, em, server, api, door, studies, market, cfg)
    finally:
        market.close()
        studies.close()
        server.stop()
        door.close()
        em.stop()


def rating_type(market: ProlificMarketplace) -> str:
    """A HIT type as a Likert stage makes one (its reward is paid by Prolific, not on the task site)."""
    return market.create_hit_type(HitType(title="Rate", description="Rate statements", reward=Decimal("0.10"), duration=600,
                                          auto_approval_delay=86400, keywords="k", qualifications=Qualifications()),
                                  sandbox=True)
