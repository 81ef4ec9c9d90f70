"""Shared by the Prolific tests: which service they run against, and the handle they get."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from campaign.clock import ManualClock
from campaign.market.prolific_site import ProlificDoor
from campaign.market.server import RunningMarket, start_market
from campaign.marketplaces import open_marketplace
from campaign.marketplaces.base import HitRequest, HitType
from campaign.marketplaces.prolific import ProlificMarketplace
from campaign.prolific.checks import CheckCount
from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.server import RunningEmulator, start_emulator
from campaign.prolific.studies import ProlificStudies
from campaign.prolific.study import ProlificConfig
from campaign.spec import Qualifications
from campaign.store import Store
from campaign.tasks import likert
from campaign.tasks.base import ShownItem

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
    the journal (in a store, campaign "c") and the adapter over them (what `campaign.providers.prolific`
    builds for a run)."""

    clock: ManualClock
    em: RunningEmulator
    server: RunningMarket
    api: ProlificClient
    door: ProlificDoor
    studies: ProlificStudies
    market: ProlificMarketplace
    cfg: ProlificConfig
    store: Store


@contextmanager
def adapter_stack(tmp: Path, configure: Callable[[str, ProlificClient], ProlificConfig],
                  checks: Callable[[Sequence[str]], CheckCount] | None = None) -> Iterator[Stack]:
    """`configure(task site URL, API client)` gives the campaign's Prolific settings (it may make groups);
    `checks` counts the attention checks among assignments (as `campaign.prolific.check_reader.store_checks` does)."""
    clock = ManualClock()
    em = start_emulator(tmp / "em", clock, fee_rate=Decimal("0.3"))
    server = start_market(tmp / "market", clock=clock, mode="prod", balance=Decimal("100.00"))
    api = ProlificClient(em.base_url, em.token, max_retries=0)
    door = ProlificDoor(server.engine, server.core.site.config, tmp / "site", api, ttl=0)
    server.mount("/prolific/", door)
    cfg = configure(server.endpoint_url, api)
    store = Store.open(tmp / "store")
    studies = ProlificStudies(api, store, "c")
    inner = open_marketplace("local", server.endpoint_url, credentials=server.credentials)
    market = ProlificMarketplace(inner, studies, door, cfg, store, "c", checks=checks)
    stack = Stack(clock, em, server, api, door, studies, market, cfg, store)
    try:
        yield stack
    finally:
        market.close()
        studies.close()
        store.close()
        server.stop()
        door.close()
        stack.em.stop()  # a test that restarts the emulator puts the new one on the stack


def one_hit_places(url: str, _api: ProlificClient) -> ProlificConfig:
    """`adapter_stack`'s plainest study: places of one HIT each at £1.50 for 10 minutes, the emulator's 30% fee."""
    return ProlificConfig(public_url=url, bundle=1, estimated_minutes=10, reward=Decimal("1.50"), fee_rate=Decimal("0.3"))


def rating_type(market: ProlificMarketplace) -> str:
    """A HIT type as a Likert stage makes one (its reward is paid by Prolific, not on the task site)."""
    return market.create_hit_type(HitType(title="Rate", description="Rate statements", reward=Decimal("0.10"), duration=600,
                                          auto_approval_delay=86400, keywords="k", qualifications=Qualifications()),
                                  sandbox=True)


@contextmanager
def likert_study(tmp: Path, texts: list[str], hits: int, per_hit: int, assignments: int, bundle: int) -> Iterator[tuple[Stack, str, list[str]]]:
    """An adapter stack (study in the US and GB, bundles of `bundle` HITs at \u00a31.50) with `hits` Likert
    HITs of `per_hit` of `texts` each, `assignments` places each, refilled as the daemon's `places` step
    does once the ledger has reserved them; yields (the stack, the HIT type, the HIT ids)."""
    def configure(url: str, _api: ProlificClient) -> ProlificConfig:
        return ProlificConfig(public_url=url, bundle=bundle, estimated_minutes=10, maximum_minutes=30, reward=Decimal("1.50"),
                              countries=("US", "GB"))

    with adapter_stack(tmp, configure) as st:
        t = rating_type(st.market)
        ids = []
        for i in range(hits):
            items = [ShownItem(f"s{i}-{j}", texts[i * per_hit + j]) for j in range(per_hit)]
            ids.append(st.market.create_hit(t, HitRequest(html=likert.page(items, "Water", "Rate the statements"),
                                                          max_assignments=assignments, lifetime=86400, annotation=f"a{i}",
                                                          token=f"t{i}")).hit_id)
        st.market.refill(t, st.market.places_wanted()[t])
        yield st, t, ids


def run_beside_crowd(proc: Any, crowd: Any, em: RunningEmulator, port: int, timeout: float = 300) -> tuple[str, str]:
    """The real road's last leg: wait until the daemon's task site answers on `port`, let the participants
    in, and return the daemon's (stdout, stderr) once it has ended; the crowd, the daemon and the
    emulator are stopped whatever happens."""
    import socket
    import time

    try:
        for _ in range(100):  # the task site is up once the daemon has started
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        crowd.start()
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        crowd.stop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        em.stop()
    return stdout, stderr


def diligent_participants(em: RunningEmulator, port: int, propositions: Path) -> Any:
    """Six diligent participants of `em`, arriving at once, who find the daemon's task site on `port`;
    their answers follow the water corpus's truth for `propositions` (a TSV of its first rows)."""
    from campaign.clock import WallClock
    from campaign.crowd.models import make_pool
    from campaign.crowd.participants import ParticipantCrowd
    from campaign.inputs import load_items, load_truth
    from tests.support.paths import WATER

    truth = load_truth(WATER / "truth.tsv")
    by_text = {it.text: truth.get(it.key, 0.5) for it in load_items("propositions", propositions)}
    return ParticipantCrowd(em.root_url, em.token, f"http://127.0.0.1:{port}",
                            make_pool(6, 1, {"diligent": 1.0}, arrival_span=0), by_text, seed=1, clock=WallClock(),
                            return_share=0.0, abandon_share=0.0)
