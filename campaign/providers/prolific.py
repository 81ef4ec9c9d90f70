"""The Prolific marketplaces: `prolific-local` (the Prolific emulator, in-process, on the run's clock, with
the campaign's fee and VAT rates; with `crowd: simulated`, simulated participants,
`campaign.crowd.participants.ParticipantCrowd`, who find the studies on the emulator and do the work on
the task site) and `prolific` (the real API, with the token from `PROLIFIC_TOKEN` only, read by the
client from the environment: never passed around, stored, logged or written into the spec, the store,
events or exports, and the base URL from `PROLIFIC_BASE_URL` if set).

Either way the task site is the run's built-in marketplace (its worker site, started in the daemon's
process), with the Prolific door (`campaign.market.prolific_site.ProlificDoor`) mounted on it under
`/prolific/`; participants reach it at `task_site.public_url` (for prolific-local the built-in
marketplace's own address when that is omitted or names port 0). Each campaign's marketplace is a
`ProlificMarketplace` over the built-in marketplace, with its journal in the store (a campaign resumes
from the store alone). The emulator's state (`state/prolific/`, Prolific's side) and the door's
(`state/prolific-site/`, the task site's, beside the built-in marketplace's `state/market/`) are the
servers' own.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from campaign.clock import Clock
from campaign.marketplaces.base import Marketplace
from campaign.providers.base import ProviderRun, RunServices, SiteNeeds, StartError, Stoppable
from campaign.spec import Campaign
from campaign.store import Store

if TYPE_CHECKING:
    from campaign.crowd.participants import ParticipantCrowd
    from campaign.market.prolific_site import ProlificDoor
    from campaign.market.server import RunningMarket
    from campaign.marketplaces.prolific import ProlificMarketplace
    from campaign.prolific.client import ProlificClient
    from campaign.prolific.emulator.server import RunningEmulator
    from campaign.providers.builtin import BuiltInSite
    from campaign.steps.context import Context

TOKEN_ENV = "PROLIFIC_TOKEN"
GATE_TTL = 300.0  # seconds (run's clock) a session's confirmation is used again, with webhooks on (`ProlificGate.trust_hooks`)
DOOR_PREFIX = "/prolific/"


class CampaignClients:
    """One Prolific client per campaign (`ProlificClient.clone`), so that each campaign's API calls are
    counted as its own; the task site's gate asks through the client of the campaign whose study the
    participant claims (`for_study`), anything else through the run's own client."""

    def __init__(self, api: ProlificClient) -> None:
        self.api = api
        self.by_campaign: dict[str, ProlificClient] = {}
        self.studies: dict[str, Callable[[], list[tuple[str, str]]]] = {}  # campaign -> its (key, study id)s
        self._by_study: dict[str, ProlificClient] = {}

    def client(self, campaign: str) -> ProlificClient:
        if campaign not in self.by_campaign:
            self.by_campaign[campaign] = self.api.clone()
        return self.by_campaign[campaign]

    def for_study(self, study_id: str) -> ProlificClient:
        if study_id not in self._by_study:
            for name, listed in self.studies.items():
                if any(sid == study_id for _key, sid in listed()):
                    self._by_study[study_id] = self.client(name)
                    break
            else:
                return self.api
        return self._by_study[study_id]

    def submission(self, submission_id: str) -> dict[str, Any]:
        return self.api.submission(submission_id)


@dataclass
class ProlificPieces:
    """The running Prolific side of a run; `stop` ends what was started, in reverse order."""

    api: ProlificClient
    door: ProlificDoor
    emulator: RunningEmulator | None = None  # prolific-local
    markets: list[ProlificMarketplace] = field(default_factory=list)
    crowds: list[Stoppable] = field(default_factory=list)
    clients: CampaignClients | None = None
    webhooks: bool = False  # Prolific tells the task site of submission status changes (`campaign.prolific.hooks`)

    def stop(self) -> None:
        for crowd in self.crowds:
            crowd.stop()
        for market in reversed(self.markets):
            market.close()
            market.studies.close()
        self.door.close()
        if self.emulator is not None:
            self.emulator.stop()


def store_items_of(store: Store) -> Callable[[str], frozenset[str]]:
    """HIT id -> the items it shows, from the store (trap items left out: every participant sees those
    again on purpose); empty while the store has not recorded the HIT yet."""
    from sqlmodel import select

    from campaign.store import HitRow
    from campaign.tasks.base import TRAP_PREFIX

    def items_of(hit_id: str) -> frozenset[str]:
        with store.session() as s:
            row = s.exec(select(HitRow).where(HitRow.hit_id == hit_id)).first()
        return frozenset(k for k in row.keys() if not k.startswith(TRAP_PREFIX)) if row is not None else frozenset()
    return items_of


def store_answer_check(store: Store, campaigns: Sequence[Campaign]) -> Callable[[str, list[tuple[str, str]]], None]:
    """(HIT id, posted fields) -> None, or `InvalidAnswer` when the HIT's task kind cannot read the answer:
    the same parse collect applies to the stored answer (`campaign.steps.collect.store_assignments`),
    asked at the door before anything is recorded. A HIT the store has not recorded (or a stage the
    spec no longer has) passes: collect judges its answer as before."""
    from sqlmodel import col, select

    from campaign.store import HitRow, ItemRow
    from campaign.tasks import get as get_kind
    from campaign.tasks.base import ShownItem

    by_name = {c.name: c for c in campaigns}

    def check(hit_id: str, fields: list[tuple[str, str]]) -> None:
        with store.session() as s:
            row = s.exec(select(HitRow).where(HitRow.hit_id == hit_id)).first()
            if row is None or row.campaign not in by_name:
                return
            keys = row.keys()
            texts = dict(s.exec(select(ItemRow.item_key, ItemRow.text).where(
                ItemRow.campaign == row.campaign, col(ItemRow.item_key).in_(keys))).all())
            stage_name = row.stage
        try:
            stage = by_name[row.campaign].stage(stage_name)
        except (KeyError, ValueError, LookupError):
            return
        get_kind(stage.kind).parse(stage, fields, [ShownItem(key=k, text=texts.get(k, "")) for k in keys])
    return check


class ProlificProvider:
    """`prolific` (`emulated=False`) or `prolific-local` (`emulated=True`)."""

    def __init__(self, name: str, *, emulated: bool) -> None:
        self.name = name
        self.emulated = emulated

    def preflight(self, campaigns: Sequence[Campaign], *, production: bool) -> str | None:
        """A real Prolific campaign without a token is refused before anything is started."""
        if campaigns and not self.emulated and not os.environ.get(TOKEN_ENV):
            return (f"campaign {campaigns[0].name!r} recruits on Prolific: set the environment variable {TOKEN_ENV} to "
                    "your API token (Prolific > Settings > API tokens); it is read from the environment only, "
                    "never stored or printed")
        return None

    def simulates(self, campaign: Campaign) -> bool:
        return self.emulated and campaign.crowd.kind == "simulated" and not campaign.endpoint_url

    def clock_url(self, campaign: Campaign) -> str | None:
        return None  # the emulator's own clock is not followed yet: a run with a task site elsewhere keeps the wall's

    def public_url(self, c: Campaign, market_endpoint: str) -> str:
        """Where participants reach the task site."""
        given = c.public_url
        if self.emulated and (not given or re.search(r":0(/|$)", given)):
            return market_endpoint
        assert given, "the spec requires task_site.public_url for marketplace: prolific"
        return given.rstrip("/")

    def site_needs(self, campaigns: Sequence[Campaign], *, market_port: int, virtual: bool) -> SiteNeeds | None:
        """The door mounts on the worker site: in this process. Real Prolific participants come through
        `task_site.public_url`; the HIT frames come from the content origin, the same host name at its
        own port, which an https public URL fixes at `--market-port` + 1 so that a reverse proxy can
        forward both (docs/prolific.md). Otherwise: the bound addresses, any free content port."""
        if not campaigns:
            return None
        if not self.emulated and all(c.endpoint_url for c in campaigns):
            return None  # the task site and its door are a `campaign market serve --prolific-door`'s (`RemoteProlificRun`)
        real = [] if self.emulated else [c.public_url.rstrip("/") for c in campaigns if c.public_url]
        if not real:
            return SiteNeeds(in_process=True)
        return SiteNeeds(True, real[0], market_port + 1 if market_port and real[0].startswith("https://") else 0)

    def start(self, campaigns: Sequence[Campaign], services: RunServices) -> ProviderRun:
        if not self.emulated and any(c.endpoint_url for c in campaigns):
            return start_remote(self, campaigns, services)
        site = services.need_site()
        if site.server is None:
            raise StartError("Prolific cannot start: the task site is not in this process")
        try:
            pieces = start_pieces(self, campaigns, services.state_dir, services.clock, site.server,
                                  items_of=store_items_of(services.store),
                                  check_answer=store_answer_check(services.store, campaigns))
        except Exception as exc:
            raise StartError(f"Prolific cannot start: {exc}") from exc
        if services.virtual and pieces.emulator is not None:
            from campaign.web.loopback import add_route

            add_route(pieces.emulator.root_url, pieces.emulator.app)
            services.sim_crowds.append(pieces.emulator.hooks)  # Prolific's deliveries, on the run's timeline
        elif pieces.emulator is not None:
            pieces.emulator.hooks.start()
        self._webhooks(campaigns, services, site, pieces)
        if services.say is not None:
            for c in campaigns:
                services.say(f"task site for {c.name} (Prolific participants): {self.public_url(c, site.endpoint_url)}/prolific/start "
                             f"(served here at {site.endpoint_url}; HIT frames from {site.content_url})")
        return ProlificRun(self, services, site, pieces)

    def _webhooks(self, campaigns: Sequence[Campaign], services: RunServices, site: BuiltInSite, pieces: ProlificPieces) -> None:
        """Webhooks first: when Prolific can reach the task site (the emulator always; Prolific through
        `task_site.public_url`), subscribe to submission status changes at the site's hook URL and arm
        the door's receiver with the workspace's secret (read from Prolific now, kept in memory only).
        If that fails, the campaigns poll as before (`webhooks: false` in their usage)."""
        import logging

        from campaign.prolific.hooks import HookReceiver, ensure_subscription, hook_url

        first = campaigns[0]
        if not self.emulated and not first.public_url:
            return
        assert first.prolific is not None and pieces.clients is not None and site.server is not None
        api = pieces.clients.client(first.name)  # the subscription's calls are counted as the first campaign's
        receiver = HookReceiver(services.store, site.server.engine.clock.now, study_of=pieces.door.study_of_submission,
                                changed=pieces.door.gate.forget)
        try:
            workspace = first.prolific.workspace or str(api.workspaces()[0]["id"])
            receiver.arm(ensure_subscription(api, services.store, workspace, hook_url(self.public_url(first, site.endpoint_url))))
        except Exception as exc:  # noqa: BLE001 - polling still works: say so, and go on without
            logging.getLogger(__name__).warning("Prolific webhooks are off (polling only): %s", exc)
            return
        pieces.door.hooks = receiver
        pieces.webhooks = True
        # Prolific now tells the site when a session changes, and a hook about a session drops what was
        # remembered of it at once: a confirmation serves the session's requests for a while (answers
        # recorded, tasks handed out) instead of asking Prolific at each one
        if pieces.door.gate.ttl <= 0:
            pieces.door.gate.ttl = GATE_TTL
        pieces.door.gate.trust_hooks = True


def start_pieces(provider: ProlificProvider, campaigns: Sequence[Campaign], state_dir: Path, clock: Clock,
                 server: RunningMarket, items_of: Callable[[str], frozenset[str]] | None = None,
                 check_answer: Callable[[str, list[tuple[str, str]]], None] | None = None) -> ProlificPieces:
    """The emulator (prolific-local) or the real API client, and the door mounted on the task site;
    `items_of` (`store_items_of`) lets the door keep a participant from seeing an item twice in a stage,
    `check_answer` (`store_answer_check`) refuse an answer the HIT's task kind cannot read."""
    from campaign.market.prolific_site import ProlificDoor
    from campaign.prolific.client import ProlificClient

    emulator = None
    if provider.emulated:
        from campaign.prolific.emulator.server import start_emulator

        cfg = campaigns[0].prolific
        assert cfg is not None
        # The emulated account is set up as the first campaign's spec assumes (rates, and its workspace's
        # currency when first made); the campaigns then read it as they would read a real account.
        emulator = start_emulator(state_dir / "prolific", clock, fee_rate=cfg.fee_rate, vat_rate=cfg.vat_rate,
                                  currency=cfg.currency)
        api = ProlificClient(emulator.base_url, emulator.token, max_retries=2, timeout=30.0)
    else:
        api = ProlificClient(max_retries=3, timeout=30.0)  # PROLIFIC_TOKEN / PROLIFIC_BASE_URL from the environment
    clients = CampaignClients(api)
    door = ProlificDoor(server.engine, server.site_config, state_dir / "prolific-site", clients, items_of=items_of,
                        check_answer=check_answer)
    try:
        server.mount(DOOR_PREFIX, door)
    except ValueError:
        door.close()
        if emulator is not None:
            emulator.stop()
        raise ValueError("one run serves one Prolific: run the prolific and prolific-local campaigns separately") from None
    return ProlificPieces(api=api, door=door, emulator=emulator, clients=clients)


class ProlificRun:
    def __init__(self, provider: ProlificProvider, services: RunServices, site: BuiltInSite, pieces: ProlificPieces) -> None:
        self.provider = provider
        self.services = services
        self.site = site
        self.pieces = pieces
        self.opened: dict[str, ProlificMarketplace] = {}

    def open(self, campaign: Campaign) -> Marketplace:
        """The campaign's `ProlificMarketplace` over the built-in marketplace."""
        from campaign.marketplaces.mturk import open_mturk
        from campaign.marketplaces.prolific import ProlificMarketplace
        from campaign.migrations.prolific_files import import_campaign
        from campaign.prolific.hooks import StudyWatch
        from campaign.prolific.studies import ProlificStudies

        options: dict[str, Any] = {"max_rps": campaign.max_rps} if campaign.max_rps else {}
        inner = open_mturk("local", self.site.endpoint_url, production_ok=self.services.production,
                           credentials=self.site.credentials, **options)
        if self.services.virtual:
            self.site.loopback(inner)
        assert campaign.prolific is not None
        store = self.services.store
        # A journal an earlier release left in files that the store's upgrade did not read (a PostgreSQL store
        # migrated from another state folder): read in now, before any call to Prolific.
        import_campaign(store.engine, self.services.state_dir, campaign.name)
        cfg = dataclasses.replace(campaign.prolific, public_url=self.provider.public_url(campaign, self.site.endpoint_url))
        emulator = self.pieces.emulator
        service_now = emulator.emulator.clock.now if emulator is not None else time.time
        clients = self.pieces.clients
        api = clients.client(campaign.name) if clients is not None else self.pieces.api
        watch = StudyWatch(store, service_now) if self.pieces.webhooks else None
        studies = ProlificStudies(api, store, campaign.name, now=service_now,  # bonus reconciliation on the service's clock
                                  watch=watch)
        if clients is not None:
            clients.studies[campaign.name] = studies.study_ids
        from campaign.prolific.check_reader import store_checks

        market = ProlificMarketplace(inner, studies, self.pieces.door, cfg, store, campaign.name, name=self.provider.name,
                                     checks=store_checks(store, campaign))
        self.pieces.markets.append(market)
        self.opened[campaign.name] = market
        return market

    def check(self, ctx: Context) -> None:
        self.site.check_knows_store(ctx)

    def start_crowds(self, contexts: Sequence[Context]) -> None:
        for ctx in contexts:
            if self.provider.simulates(ctx.campaign):
                crowd = self._participants(ctx.campaign, self.opened[ctx.name], ctx.seed, ctx.clock)
                if self.services.virtual:
                    self.services.sim_crowds.append(crowd)

    def _participants(self, c: Campaign, market: ProlificMarketplace, seed: int, clock: Clock) -> ParticipantCrowd:
        """Simulated participants for a prolific-local campaign with `crowd: simulated`: the campaign's own
        `crowd.workers`, registered on the emulator under the campaign's name (the same people again after
        a restart), taking only this campaign's studies, working through the task site's door. On virtual
        time they only sign up: the run's timeline steps them."""
        from campaign.crowd.adversaries import assign
        from campaign.crowd.models import make_pool
        from campaign.crowd.participants import ParticipantCrowd
        from campaign.inputs import load_items, load_truth

        emulator = self.pieces.emulator
        assert emulator is not None
        truth = load_truth(c.crowd.truth) if c.crowd.truth else {}
        by_text = {it.text: truth.get(it.key, 0.5) for it in load_items(c.input_kind, c.input_path)}
        workers = make_pool(c.crowd.workers, seed, dict(c.crowd.mix), arrival_span=c.crowd.arrival_span)
        studies = market.studies

        def wants(row: dict[str, Any]) -> bool:
            return any(row.get("id") == sid for _, sid in studies.study_ids())

        crowd = ParticipantCrowd(emulator.root_url, emulator.token, self.site.endpoint_url, workers, by_text, seed=seed,
                                 clock=clock, poll=0.05, namespace=c.name, wants=wants,
                                 adversaries=assign(workers, c.crowd.adversaries, seed))
        if self.services.virtual:
            crowd.prepare()
        else:
            crowd.start()
        self.pieces.crowds.append(crowd)
        return crowd

    def stop(self) -> None:
        self.pieces.stop()


def start_remote(provider: ProlificProvider, campaigns: Sequence[Campaign], services: RunServices) -> ProviderRun:
    """`marketplace: prolific` campaigns naming an `endpoint_url`: the task site is the marketplace a
    `campaign market serve --prolific-door` runs there, with the door in its process (so it outlives any
    daemon: several daemons on one store share it, `campaign.market.door_remote`); this daemon posts HITs
    there and asks the door through `RemoteDoor`, signed with the requester credentials it posts with
    (the AWS credentials chain, e.g. AWS_SHARED_CREDENTIALS_FILE, as for `marketplace: local` with an
    endpoint)."""
    if not all(c.endpoint_url for c in campaigns):
        raise StartError("Prolific campaigns with an endpoint_url (a shared task site) and without one (this run's own) "
                         "cannot run together: run them separately")
    import boto3  # type: ignore[import-untyped]

    from campaign.prolific.client import ProlificClient

    found = boto3.Session().get_credentials()
    if found is None:
        raise StartError(f"campaign {campaigns[0].name!r} posts to the task site at {campaigns[0].endpoint_url}: give its "
                         "requester credentials (AWS_SHARED_CREDENTIALS_FILE=<its --state>/credentials)")
    creds = found.get_frozen_credentials()
    if services.say is not None:
        for c in campaigns:
            services.say(f"task site for {c.name} (Prolific participants): {c.public_url}/prolific/start "
                         f"(the door of the marketplace at {c.endpoint_url})")
    return RemoteProlificRun(provider, services, ProlificClient(max_retries=3, timeout=30.0), creds.access_key,
                             creds.secret_key)


class RemoteProlificRun:
    """The campaigns' `ProlificMarketplace`s over a shared marketplace and its door (`start_remote`)."""

    def __init__(self, provider: ProlificProvider, services: RunServices, api: ProlificClient, key: str, secret: str) -> None:
        self.provider = provider
        self.services = services
        self.api = api
        self._key, self._secret = key, secret
        self.markets: list[ProlificMarketplace] = []

    def __repr__(self) -> str:
        return "RemoteProlificRun()"  # never the key

    def open(self, campaign: Campaign) -> Marketplace:
        from campaign.market.door_remote import RemoteDoor
        from campaign.marketplaces.mturk import open_mturk
        from campaign.marketplaces.prolific import ProlificMarketplace
        from campaign.prolific.studies import ProlificStudies

        assert campaign.prolific is not None and campaign.endpoint_url and campaign.public_url
        options: dict[str, Any] = {"max_rps": campaign.max_rps} if campaign.max_rps else {}
        inner = open_mturk("local", campaign.endpoint_url, production_ok=self.services.production, **options)
        door = RemoteDoor(campaign.endpoint_url, self._key, self._secret)
        cfg = dataclasses.replace(campaign.prolific, public_url=campaign.public_url.rstrip("/"))
        studies = ProlificStudies(self.api, self.services.store, campaign.name, now=time.time)
        market = ProlificMarketplace(inner, studies, door, cfg, self.services.store, campaign.name, name=self.provider.name)
        self.markets.append(market)
        return market

    def check(self, ctx: Context) -> None:
        """The shared marketplace is checked by whoever runs it; nothing of it lives here."""

    def start_crowds(self, contexts: Sequence[Context]) -> None:
        """Real Prolific's participants are people; an emulator's are played by `campaign crowd run`."""

    def stop(self) -> None:
        for market in reversed(self.markets):
            market.close()
            market.studies.close()
