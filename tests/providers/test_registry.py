"""A marketplace is one registered provider: a provider defined in this file alone, registered for a
block, carries a whole campaign through `campaign.daemon.run`, and is gone after the block."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import pytest

from campaign import providers
from campaign.daemon import RunError, RunOptions, run
from campaign.marketplaces.base import Marketplace
from campaign.marketplaces.mturk import open_mturk
from campaign.providers.base import RunServices, SiteNeeds
from campaign.providers.mturk import start_crowds
from campaign.spec import Campaign, Spec, load_spec
from campaign.state import CampaignStatus
from campaign.steps.context import Context
from campaign.store import CampaignRow, Store
from tests.support.specs import campaign, first_propositions, simulated, write_spec

NAME = "test-fake-market"


class FakeProvider:
    """A marketplace the daemon has never heard of: its HITs go to a built-in marketplace it asks the run
    for, its crowd is one it starts itself; it records what the run asked of it."""

    name = NAME

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.opened: dict[str, Marketplace] = {}

    def preflight(self, campaigns: Sequence[Campaign], *, production: bool) -> str | None:
        self.calls.append(("preflight", ",".join(c.name for c in campaigns)))
        return None

    def simulates(self, campaign: Campaign) -> bool:
        return campaign.crowd.kind == "simulated"

    def clock_url(self, campaign: Campaign) -> str | None:
        return None

    def site_needs(self, campaigns: Sequence[Campaign], *, market_port: int, virtual: bool) -> SiteNeeds | None:
        return SiteNeeds()

    def start(self, campaigns: Sequence[Campaign], services: RunServices) -> FakeRun:
        self.calls.append(("start", ",".join(c.name for c in campaigns)))
        return FakeRun(self, services)


class FakeRun:
    def __init__(self, provider: FakeProvider, services: RunServices) -> None:
        self.provider, self.services = provider, services

    def open(self, campaign: Campaign) -> Marketplace:
        site = self.services.need_site()
        market = open_mturk("local", site.endpoint_url, credentials=site.credentials, max_rps=0)
        if self.services.virtual:
            site.loopback(market)
        self.provider.calls.append(("open", campaign.name))
        self.provider.opened[campaign.name] = market
        return market

    def check(self, ctx: Context) -> None:
        self.provider.calls.append(("check", ctx.name))

    def start_crowds(self, contexts: Sequence[Context]) -> None:
        self.provider.calls.append(("crowds", ",".join(ctx.name for ctx in contexts)))
        self.services.crowds.append(start_crowds(contexts, self.services.need_site(), self.services))

    def stop(self) -> None:
        self.provider.calls.append(("stop", ""))


def _spec(tmp_path: Path) -> Spec:
    spec = load_spec(write_spec(tmp_path / "campaigns.yaml", campaign(
        "fake", propositions=first_propositions(tmp_path, 6), budget="20.00", crowd=simulated(12, speed=3600, arrival_span="10m"),
        stages=[{"name": "likert", "kind": "likert", "assignments": 3}])))
    return dataclasses.replace(spec, campaigns=tuple(dataclasses.replace(c, marketplace=NAME) for c in spec.campaigns))


def test_a_provider_registered_by_a_test_runs_a_campaign_and_is_gone_afterwards(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    fake = FakeProvider()
    state = tmp_path / "state"
    seen: list[Marketplace] = []
    with providers.registered(fake):
        assert providers.get(NAME) is fake
        rc = run(spec, RunOptions(state_dir=state, seed=2, max_seconds=120),
                 progress=lambda rt: seen.extend(ctx.market for ctx in rt.contexts[:1] if not seen))
    assert rc == 0
    assert [kind for kind, _ in fake.calls] == ["preflight", "start", "open", "check", "crowds", "stop"]
    assert seen == [fake.opened["fake"]]  # the daemon's context holds what the provider opened
    store = Store.open(state)
    try:
        with store.session() as s:
            row = s.get(CampaignRow, "fake")
            assert row is not None and row.status == CampaignStatus.FINISHED
    finally:
        store.close()
    assert (state / "fake" / "scores.csv").is_file()
    assert NAME not in providers.names()
    with pytest.raises(RunError, match="has no provider"):
        run(spec, RunOptions(state_dir=tmp_path / "again", seed=2, max_seconds=30))


def test_a_name_is_registered_once_unless_replaced() -> None:
    with providers.registered(FakeProvider()):
        with pytest.raises(ValueError, match="already has a provider"):
            providers.register(FakeProvider())
        other = FakeProvider()
        with providers.registered(other, replace=True):
            assert providers.get(NAME) is other
        assert providers.get(NAME) is not other
    assert NAME not in providers.names()
