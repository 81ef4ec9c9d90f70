"""The MTurk-API marketplaces: `local` (the built-in marketplace, started by the run unless the campaign
names another one's `endpoint_url`), `mturk-sandbox` and `mturk` (Amazon's, real money on the latter).

A `local` campaign with a simulated crowd gets one crowd of exactly its `crowd.workers` workers, working
only its own HITs: in a child process on its own core for a live run, or stepped by the run's timeline
on virtual time.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from campaign.clock import ScaledClock
from campaign.marketplaces.base import Marketplace
from campaign.marketplaces.mturk import missing_aws_credentials, open_mturk
from campaign.providers.base import ProviderRun, RunServices, SiteNeeds, StartError, Stoppable
from campaign.spec import Campaign

if TYPE_CHECKING:
    from campaign.providers.builtin import BuiltInSite
    from campaign.steps.context import Context


class MTurkProvider:
    """One MTurk-API marketplace. `builtin`: it is the run's built-in marketplace (`local`), started by the
    run for campaigns that name no `endpoint_url`; `real_money`: posting needs `--production`."""

    def __init__(self, name: str, *, builtin: bool = False, real_money: bool = False) -> None:
        self.name = name
        self.builtin = builtin
        self.real_money = real_money

    def _on_site(self, c: Campaign) -> bool:
        return self.builtin and not c.endpoint_url

    def preflight(self, campaigns: Sequence[Campaign], *, production: bool) -> str | None:
        for c in campaigns:
            if self.real_money and not production:
                return f"campaign {c.name!r} posts to MTurk production and spends real money: add --production to confirm"
            if not self.builtin and (problem := missing_aws_credentials(self.name, c.endpoint_url)) is not None:
                return f"campaign {c.name!r}: {problem}; nothing was posted"
        return None

    def simulates(self, campaign: Campaign) -> bool:
        return campaign.crowd.kind == "simulated" and self._on_site(campaign)

    def clock_url(self, campaign: Campaign) -> str | None:
        """A standalone built-in marketplace (`endpoint_url`) worked by `campaign crowd run` keeps the time."""
        return campaign.endpoint_url if self.builtin and campaign.endpoint_url and campaign.crowd.kind == "simulated" else None

    def site_needs(self, campaigns: Sequence[Campaign], *, market_port: int, virtual: bool) -> SiteNeeds | None:
        return SiteNeeds() if any(self._on_site(c) for c in campaigns) else None

    def start(self, campaigns: Sequence[Campaign], services: RunServices) -> ProviderRun:
        site = services.need_site() if any(self._on_site(c) for c in campaigns) else None
        if site is not None and services.say is not None:
            real = [c.name for c in campaigns if self._on_site(c) and c.crowd.kind == "none"]
            if real:  # people must be sent there: without it nobody can work the HITs
                services.say(f"worker site for {', '.join(real)}: {site.endpoint_url}/ (add each worker with `campaign market worker "
                             f"add WORKER_ID --state {services.state_dir / 'market'} --url {site.endpoint_url}` and send them the "
                             "sign-in link it prints)")
        return MTurkRun(self, services, site)


class MTurkRun:
    def __init__(self, provider: MTurkProvider, services: RunServices, site: BuiltInSite | None) -> None:
        self.provider = provider
        self.services = services
        self.site = site

    def open(self, campaign: Campaign) -> Marketplace:
        on_site = self.provider._on_site(campaign)
        options: dict[str, Any] = {"max_rps": campaign.max_rps} if campaign.max_rps else {}
        if on_site:
            assert self.site is not None
            market = open_mturk(self.provider.name, self.site.endpoint_url, production_ok=self.services.production,
                                credentials=self.site.credentials, **options)
            if self.services.virtual:  # on virtual time: no socket between the daemon and its marketplace
                self.site.loopback(market)
            return market
        return open_mturk(self.provider.name, campaign.endpoint_url, production_ok=self.services.production, **options)

    def check(self, ctx: Context) -> None:
        if self.site is not None and self.provider._on_site(ctx.campaign):
            self.site.check_knows_store(ctx)

    def start_crowds(self, contexts: Sequence[Context]) -> None:
        sims = [ctx for ctx in contexts if self.provider.simulates(ctx.campaign)]
        if not sims or self.site is None:
            return
        try:
            crowds = start_crowds(sims, self.site, self.services)
        except RuntimeError as exc:
            raise StartError(str(exc)) from None
        self.services.crowds.append(crowds)

    def stop(self) -> None:
        pass


def start_crowds(contexts: Sequence[Context], site: BuiltInSite, services: RunServices) -> Crowds:
    """One simulated crowd per campaign, of exactly the campaign's `crowd.workers` workers, working only
    that campaign's HITs: `workers: 40` means 40 people answered this campaign, as a reader of the spec
    expects. A lone campaign's crowd is seeded with the run's seed; with several, each pool's seed comes
    from the run's seed and the campaign's name.

    Live, the crowds run in a child process (`campaign.crowd.child`) on the same simulated clock, so the
    daemon has this process's core to itself; on virtual time they are stepped by the run's timeline, in
    this process, with no socket to the worker site."""
    from campaign.crowd.child import ChildConfig, CrowdJob, CrowdProcess, InProcessCrowds, child_can_run
    from campaign.rng import stable_seed

    jobs = tuple(CrowdJob(ctx.campaign, ctx.seed, ctx.seed if len(contexts) == 1 else stable_seed(ctx.seed, ctx.name) % 2**31)
                 for ctx in contexts)
    clock = contexts[0].clock
    endpoint = site.endpoint_url
    if services.virtual:
        app = site.server.app if site.server is not None else None
        stepped = InProcessCrowds(jobs, endpoint, clock, contexts[0].store, threads=False, app=app)
        services.sim_crowds += stepped.crowds
        return Crowds([stepped])
    here = tuple(j for j in jobs if not child_can_run(j.campaign))  # kinds only this process knows
    started: list[Stoppable] = []
    if here:
        started.append(InProcessCrowds(here, endpoint, clock, contexts[0].store))
    away = tuple(j for j in jobs if child_can_run(j.campaign))
    if away:
        shared = clock.shared() if isinstance(clock, ScaledClock) else None
        try:
            started.append(CrowdProcess(ChildConfig(endpoint=endpoint, market_state=services.state_dir / "market", clock=shared,
                                                    jobs=away, state_dir=services.state_dir, db=services.db, parent=os.getpid())))
        except RuntimeError:
            for crowd in started:
                crowd.stop()
            raise
    return Crowds(started)


class Crowds:
    """The run's crowds, wherever they run; stopped together."""

    def __init__(self, parts: list[Stoppable]) -> None:
        self.parts = parts

    def stop(self) -> None:
        for part in self.parts:
            part.stop()
