"""The run's built-in marketplace (`campaign.market`), started once for every provider that asked for it:
the whole marketplace for `local` campaigns, the task site for Prolific's.

In the daemon's process when a provider mounts routes on its worker site or the run is on virtual time
(then every request must be answered on the clock's instant, by the process that moves the clock, and
is handed over without a socket: `campaign.web.loopback`); otherwise in a child process on its own core
(`campaign.market.child`).
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from campaign.clock import ScaledClock
from campaign.credentials import Credentials
from campaign.providers.base import RunServices, SiteNeeds, StartError

if TYPE_CHECKING:
    from campaign.market.child import MarketProcess
    from campaign.market.server import RunningMarket
    from campaign.marketplaces.base import Marketplace
    from campaign.steps.context import Context
    from campaign.web.request import Response

log = logging.getLogger(__name__)


class BuiltInSite:
    """The running built-in marketplace. `server` is the in-process `RunningMarket` (None when it runs in a
    child process): what a provider mounts its routes on."""

    def __init__(self, running: RunningMarket | MarketProcess, state_dir: Path, in_process: RunningMarket | None) -> None:
        self.running = running
        self.state_dir = state_dir
        self.server = in_process
        self.endpoint_url: str = running.endpoint_url
        self.content_url: str = running.content_url
        self.credentials: Credentials = running.credentials  # its own account: AWS keys in the environment are not for it

    def stop(self) -> None:
        self.running.stop()

    def loopback(self, marketplace: Marketplace) -> None:
        """On virtual time: hand the marketplace client's requests to the application in this process."""
        from campaign.marketplaces.mturk import MTurkMarketplace
        from campaign.marketplaces.mturk_client import MarketClient
        from campaign.marketplaces.signed_json import SignedJsonClient
        from campaign.web.loopback import attach_to_boto3, transport

        if not isinstance(marketplace, MTurkMarketplace) or self.server is None or self.server.app is None:
            return
        client = marketplace.client
        if isinstance(client, SignedJsonClient):
            send = transport(self.server.app, self.endpoint_url)
            client.hand_to(lambda method, target, headers, body: _answer(send(method, target, headers, body)))
        elif isinstance(client, MarketClient):
            attach_to_boto3(client.raw, self.server.app, self.endpoint_url)

    def check_knows_store(self, ctx: Context, sample: int = 5) -> None:
        """Refuse to run when the store holds HITs the built-in marketplace does not know.

        That happens when the marketplace's database was deleted or replaced while the store was kept:
        every tick would then fail on every HIT, forever. A few of the newest open HITs are asked for
        (closed ones may have been disposed of); any unknown one means the two no longer describe the
        same campaign.
        """
        from sqlmodel import col, select

        from campaign.marketplaces.base import MarketError, TransientError
        from campaign.state import HitStatus
        from campaign.store import HitRow

        with ctx.store.session() as s:
            open_hits = select(HitRow).where(HitRow.campaign == ctx.name, HitRow.status == HitStatus.POSTED,
                                             col(HitRow.hit_id).is_not(None))
            hits = s.exec(open_hits.order_by(col(HitRow.id).desc()).limit(sample)).all()
            n_remote = len(s.exec(open_hits).all())
        unknown = []
        for hit in hits:
            assert hit.hit_id is not None
            try:
                ctx.market.get_hit(hit.hit_id)
            except TransientError:
                continue
            except MarketError:
                unknown.append(hit.hit_id)
        if unknown:
            raise StartError(
                f"campaign {ctx.name!r}: the store holds {n_remote} open HITs that the built-in marketplace at {self.state_dir} "
                f"does not know (unknown HIT ids: {', '.join(unknown[:3])}{', ...' if len(unknown) > 3 else ''}); its "
                "database was deleted or replaced. Restore the marketplace's folder, or start afresh with another --state."
            )


def _answer(response: Response) -> tuple[int, bytes]:
    return response.status, response.body


PORT_FILE = "port"  # under <state>/market: the worker site's and the content origin's ports at the last start


def start_site(services: RunServices, needs: SiteNeeds) -> BuiltInSite:
    """Start the built-in marketplace under `<state>/market` as `needs` asks.

    Without `--market-port` the worker site and its content origin take the ports they had at this state
    folder's last start (`<state>/market/port`) if those are free, else any free ones: the links handed
    to workers, the studies' URLs on Prolific, the webhook subscription's URL and the signed frame links of
    pages open in workers' browsers name the addresses the site had when they were made, and a restart
    should not break them. A port taken meanwhile is no error (a warning)."""
    from campaign.market.child import MarketStartError

    state_dir = services.state_dir / "market"
    site: BuiltInSite | None = None
    last = last_ports(state_dir) if services.market_port == 0 else None
    if last is not None:
        try:
            site = _start(services, needs, state_dir, last[0], needs.content_port or last[1])
        except (OSError, MarketStartError) as exc:
            log.warning("the built-in marketplace cannot have its last port (%d) again (%s): it takes another, and "
                        "its worker site a new address", last[0], exc)
    if site is None:
        try:
            site = _start(services, needs, state_dir, services.market_port, needs.content_port)
        except (OSError, MarketStartError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise StartError(f"the built-in marketplace cannot start on 127.0.0.1:{services.market_port}: {reason}; "
                             "choose another --market-port") from exc
    _remember_ports(state_dir, site.endpoint_url, site.content_url)
    if services.virtual and site.server is not None and site.server.app is not None:  # no socket on virtual time
        from campaign.web.loopback import add_route

        add_route(site.endpoint_url, site.server.app)
    services.site = site
    return site


def _start(services: RunServices, needs: SiteNeeds, state_dir: Path, port: int, content_port: int) -> BuiltInSite:
    from campaign.market.child import MarketConfig, MarketProcess
    from campaign.market.server import start_market

    clock = services.clock
    if needs.in_process or services.virtual:
        server = start_market(state_dir, clock=clock, mode="prod", balance=services.market_balance, port=port,
                              public_url=needs.public_url, content_port=content_port)
        return BuiltInSite(server, state_dir, server)
    child = MarketProcess(MarketConfig(
        state_dir=state_dir, clock=clock.shared() if isinstance(clock, ScaledClock) else None,
        balance=services.market_balance, port=port, content_port=content_port,
        public_url=needs.public_url, parent=os.getpid()))
    return BuiltInSite(child, state_dir, None)


def last_ports(state_dir: Path) -> tuple[int, int] | None:
    """(worker site, content origin) ports at the last start under `state_dir` (content 0: not known);
    None when none is remembered or the file is not two port numbers."""
    try:
        words = (state_dir / PORT_FILE).read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return None
    if not 1 <= len(words) <= 2 or not all(w.isdigit() and 1024 <= int(w) <= 65535 for w in words):
        return None
    return int(words[0]), int(words[1]) if len(words) == 2 else 0


def _remember_ports(state_dir: Path, endpoint_url: str, content_url: str) -> None:
    port, content = urllib.parse.urlsplit(endpoint_url).port, urllib.parse.urlsplit(content_url).port
    if port is None:
        return
    try:
        # a temp name of this process's own: two daemons starting on one folder never rename each other's
        tmp = state_dir / f"{PORT_FILE}.{os.getpid()}.tmp"
        tmp.write_text(f"{port} {content or ''}".strip() + "\n", encoding="ascii")
        tmp.replace(state_dir / PORT_FILE)
    except OSError as exc:  # a read-only folder: the next start takes any free ports, as before
        log.warning("could not remember the built-in marketplace's ports: %s", exc)
