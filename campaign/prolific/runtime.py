"""What a run needs for its Prolific campaigns, started and stopped beside the daemon's other pieces.

For `marketplace: prolific-local`: the Prolific emulator in-process (`start_emulator(state/prolific)`,
on the run's clock, with the campaign's fee and VAT rates), a client with the emulator's token, and,
with `crowd: simulated`, simulated participants (`campaign.crowd.participants.ParticipantCrowd`) who
find the studies on the emulator and do the work on the task site. For `marketplace: prolific`: the
real API, with the token from `PROLIFIC_TOKEN` only (read by the client from the environment: never
passed around, stored, logged or written into the spec, the store, events or exports) and the base
URL from `PROLIFIC_BASE_URL` if set.

Either way the task site is the run's built-in marketplace (its worker site, started by the daemon as
for `local`), with the Prolific door attached to it (`server.core.site.prolific`); participants reach
it at `task_site.public_url` (for prolific-local the built-in marketplace's own address when that is
omitted or names port 0). Each campaign's `Context.market` is a `ProlificMarketplace` over the
built-in marketplace, with its own journal under `state/<campaign>/prolific/`.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from campaign.clock import Clock
from campaign.spec import PROLIFIC_MARKETPLACES, Campaign

TOKEN_ENV = "PROLIFIC_TOKEN"


class ProlificStartError(Exception):
    """A Prolific campaign cannot start; the message says why (and never holds a token)."""


def is_prolific(c: Campaign) -> bool:
    return c.marketplace in PROLIFIC_MARKETPLACES


def check_environment(campaigns: list[Campaign]) -> None:
    """Refuse a real Prolific campaign without a token before anything is started."""
    real = [c.name for c in campaigns if c.marketplace == "prolific"]
    if real and not os.environ.get(TOKEN_ENV):
        raise ProlificStartError(f"campaign {real[0]!r} recruits on Prolific: set the environment variable {TOKEN_ENV} to "
                                 "your API token (Prolific > Settings > API tokens); it is read from the environment only, "
                                 "never stored or printed")


def public_url(c: Campaign, market_endpoint: str) -> str:
    """Where participants reach the task site."""
    given = c.public_url
    if c.marketplace == "prolific-local" and (not given or re.search(r":0(/|$)", given)):
        return market_endpoint
    assert given, "the spec requires task_site.public_url for marketplace: prolific"
    return given.rstrip("/")


def site_addresses(campaigns: list[Campaign], market_port: int) -> tuple[str | None, int]:
    """(public address of the worker site, port of the content origin) for the built-in marketplace.

    Real Prolific participants come through `task_site.public_url`; the HIT frames come from the
    content origin, the same host name at its own port, which an https public URL fixes at
    `--market-port` + 1 so that a reverse proxy can forward both (docs/prolific.md). Otherwise: the bound
    addresses, any free content port."""
    real = [c.public_url.rstrip("/") for c in campaigns if c.marketplace == "prolific" and c.public_url]
    if not real:
        return None, 0
    return real[0], (market_port + 1 if market_port and real[0].startswith("https://") else 0)


@dataclass
class ProlificPieces:
    """The running Prolific side of a run; `stop` ends what was started, in reverse order."""

    emulator: Any = None  # campaign.prolific.emulator.server.RunningEmulator (prolific-local)
    api: Any = None  # campaign.prolific.client.ProlificClient
    door: Any = None  # campaign.market.prolific_site.ProlificDoor
    closers: list[Any] = field(default_factory=list)
    crowds: list[Any] = field(default_factory=list)

    def stop(self) -> None:
        for crowd in self.crowds:
            crowd.stop()
        for obj in reversed(self.closers):
            obj.close()
        if self.door is not None:
            self.door.close()
        if self.emulator is not None:
            self.emulator.stop()


def store_items_of(store: Any) -> Callable[[str], frozenset[str]]:
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


def start_prolific(campaigns: list[Campaign], state_dir: Path, clock: Clock, market_server: Any,
                   items_of: Callable[[str], frozenset[str]] | None = None) -> ProlificPieces:
    """The emulator (prolific-local) or the real API client, and the door on the task site; `items_of`
    (`store_items_of`) lets the door keep a participant from seeing an item twice in a stage."""
    from campaign.market.prolific_site import ProlificDoor
    from campaign.prolific.client import ProlificClient

    pieces = ProlificPieces()
    local = [c for c in campaigns if c.marketplace == "prolific-local"]
    real = [c for c in campaigns if c.marketplace == "prolific"]
    if local and real:
        raise ProlificStartError("one run serves one Prolific: run the prolific and prolific-local campaigns separately")
    if local:
        from campaign.prolific.emulator.server import start_emulator

        cfg = local[0].prolific
        assert cfg is not None
        pieces.emulator = start_emulator(state_dir / "prolific", clock, fee_rate=cfg.fee_rate, vat_rate=cfg.vat_rate)
        pieces.api = ProlificClient(pieces.emulator.base_url, pieces.emulator.token, max_retries=2, timeout=30.0)
    else:
        pieces.api = ProlificClient(max_retries=3, timeout=30.0)  # PROLIFIC_TOKEN / PROLIFIC_BASE_URL from the environment
    pieces.door = ProlificDoor(market_server.engine, market_server.core.site.config, state_dir / "prolific-site", pieces.api,
                               items_of=items_of)
    market_server.core.site.prolific = pieces.door
    return pieces


def open_market(c: Campaign, pieces: ProlificPieces, inner: Any, state_dir: Path, market_endpoint: str) -> Any:
    """The campaign's `ProlificMarketplace` over the built-in marketplace `inner`."""
    from campaign.marketplaces.prolific import ProlificMarketplace
    from campaign.prolific.studies import ProlificStudies

    assert c.prolific is not None
    cfg = dataclasses.replace(c.prolific, public_url=public_url(c, market_endpoint))
    studies = ProlificStudies(pieces.api, state_dir / c.name / "prolific")
    market = ProlificMarketplace(inner, studies, pieces.door, cfg, state_dir / c.name / "prolific", name=c.marketplace)
    pieces.closers += [studies, market]
    return market


def start_participants(c: Campaign, pieces: ProlificPieces, market: Any, site_url: str, seed: int, clock: Clock) -> Any:
    """Simulated participants for a prolific-local campaign with `crowd: simulated`: the campaign's own
    `crowd.workers`, registered on the emulator under the campaign's name (the same people again after a
    restart), taking only this campaign's studies, working through the task site's door."""
    from campaign.crowd.adversaries import assign
    from campaign.crowd.models import make_pool
    from campaign.crowd.participants import ParticipantCrowd
    from campaign.inputs import load_items, load_truth

    truth = load_truth(c.crowd.truth) if c.crowd.truth else {}
    by_text = {it.text: truth.get(it.key, 0.5) for it in load_items(c.input_kind, c.input_path)}
    workers = make_pool(c.crowd.workers, seed, dict(c.crowd.mix), arrival_span=c.crowd.arrival_span)
    studies = market.studies

    def wants(row: dict[str, Any]) -> bool:
        return any(row.get("id") == sid for _, sid in studies.study_ids())

    crowd = ParticipantCrowd(pieces.emulator.root_url, pieces.emulator.token, site_url, workers, by_text, seed=seed,
                             clock=clock, poll=0.05, namespace=c.name, wants=wants,
                             adversaries=assign(workers, c.crowd.adversaries, seed))
    crowd.start()
    pieces.crowds.append(crowd)
    return crowd
