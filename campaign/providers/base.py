"""What a marketplace provider is: the one object per `marketplace:` name that starts what a run needs
for its campaigns, opens each campaign's marketplace, starts their simulated crowds and stops.

The daemon only ever talks to these protocols: it groups the run's campaigns by provider, asks each
provider what it needs of the built-in marketplace (`SiteNeeds`), starts that once for all of them
(`campaign.providers.builtin`), lets each provider start its own pieces (`Provider.start`), opens every
campaign through the `ProviderRun` it got back, and stops the runs in reverse order. It never asks
which marketplace a campaign is on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from campaign.clock import Clock, is_virtual
from campaign.marketplaces.base import Marketplace
from campaign.spec import Campaign
from campaign.store import Store

if TYPE_CHECKING:
    from campaign.providers.builtin import BuiltInSite
    from campaign.steps.context import Context
    from campaign.timeline import Crowd


class StartError(Exception):
    """What a provider needs cannot start (or the run must not); the message says why and what to do."""


class Stoppable(Protocol):
    def stop(self) -> None: ...


@dataclass(frozen=True)
class SiteNeeds:
    """What a provider's campaigns need of the run's built-in marketplace: to run it in the daemon's own
    process (`in_process`: something mounts on its worker site, or a request must be answered on the
    clock's instant), the address browsers use for its worker site, and the port of its content origin
    (0: any free port)."""

    in_process: bool = False
    public_url: str | None = None
    content_port: int = 0

    def merged(self, other: SiteNeeds) -> SiteNeeds:
        return SiteNeeds(self.in_process or other.in_process, self.public_url or other.public_url,
                         self.content_port or other.content_port)


@dataclass
class RunServices:
    """What every provider of one run shares: the store, the clock, the run's options, the built-in
    marketplace once started (`site`), and the crowds the providers started (`crowds` are stopped with
    the run; `sim_crowds` are the ones a virtual-time run's timeline steps, with no threads of their own)."""

    store: Store
    clock: Clock
    state_dir: Path
    seed: int
    db: str | None = None
    production: bool = False
    market_port: int = 0
    market_balance: Decimal = Decimal("10000.00")
    say: Callable[[str], None] | None = None
    site: BuiltInSite | None = None
    crowds: list[Stoppable] = field(default_factory=list)
    sim_crowds: list[Crowd] = field(default_factory=list)

    @property
    def virtual(self) -> bool:
        return is_virtual(self.clock)

    def need_site(self) -> BuiltInSite:
        if self.site is None:
            raise StartError("the built-in marketplace was not started for this run")
        return self.site


class ProviderRun(Protocol):
    """One provider's part of a running daemon, for the campaigns it was started with."""

    def open(self, campaign: Campaign) -> Marketplace:
        """The campaign's marketplace (what `Context.market` holds)."""
        ...

    def check(self, ctx: Context) -> None:
        """Refuse (`StartError`) a campaign whose stored state the marketplace contradicts."""
        ...

    def start_crowds(self, contexts: Sequence[Context]) -> None:
        """Start the simulated crowds these campaigns ask for (into `RunServices.crowds`/`sim_crowds`)."""
        ...

    def stop(self) -> None: ...


class Provider(Protocol):
    """A marketplace, as the daemon knows it. Registered under `name` (`campaign.providers.register`)."""

    name: str

    def preflight(self, campaigns: Sequence[Campaign], *, production: bool) -> str | None:
        """Why this run must not start these campaigns (e.g. no credentials, real money unconfirmed), said
        before anything is written; None when they may."""
        ...

    def simulates(self, campaign: Campaign) -> bool:
        """Whether the campaign's simulated crowd runs inside this run (then the run can be on simulated time)."""
        ...

    def clock_url(self, campaign: Campaign) -> str | None:
        """Where the campaign's marketplace tells its time (`GET URL/clock`) when a simulated crowd works
        it from outside this run on the marketplace's own simulated clock, which the run must then follow
        (`campaign.marketplaces.remote_clock`); None: nothing to follow."""
        ...

    def site_needs(self, campaigns: Sequence[Campaign], *, market_port: int, virtual: bool) -> SiteNeeds | None:
        """What these campaigns need of the run's built-in marketplace (None: nothing)."""
        ...

    def start(self, campaigns: Sequence[Campaign], services: RunServices) -> ProviderRun:
        """Start what these campaigns need for the run (after the built-in marketplace, if any asked for it)."""
        ...
