"""What every daemon step needs, in one object: the store, the marketplace, the spec, the clock.

Also the test hook `CAMPAIGN_TEST_CRASH=point:N`, which kills the process with SIGKILL the N-th time a
named point is reached (e.g. `post.after_call:3`), so a test can crash the daemon in the exact window
between a remote call and its record in the store.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sqlmodel import Session, SQLModel

from campaign.clock import Clock
from campaign.filemodes import private_dir
from campaign.marketplaces.base import Marketplace
from campaign.readmodel.scores import StoreStageData
from campaign.spec import Campaign
from campaign.store import HitRow, Store

log = logging.getLogger(__name__)

# Context.cache keys set by collect / review when their pass ran out of time with work left: the
# daemon is behind the crowd, and `post` puts up nothing new until it has caught up.
BEHIND_COLLECT = "behind:collect"
BEHIND_REVIEW = "behind:review"

@dataclass
class Context:
    store: Store
    market: Marketplace
    campaign: Campaign
    seed: int
    state_dir: Path
    clock: Clock
    instance: str  # stable per campaign instance: part of every request token
    lock: threading.Lock = field(default_factory=threading.Lock)
    cache: dict[str, Any] = field(default_factory=dict)  # what a step keeps between passes of this daemon (never state)
    # wall seconds between two `alerts` steps of this campaign (0: every pass). The daemon on the wall
    # clock sets it (`campaign.daemon.ALERTS_EVERY`); a virtual-time run and the tests leave it at 0
    alerts_every: float = 0.0

    def __post_init__(self) -> None:
        from campaign.marketplaces.mturk_client import MarketClient

        if isinstance(self.market, MarketClient):  # a bare boto3 wrapper (older callers, tests)
            from campaign.marketplaces.mturk import MTurkMarketplace

            self.market = MTurkMarketplace(self.market)

    @property
    def data(self) -> StoreStageData:
        """The store as task kinds read it (exports, batch planning)."""
        return StoreStageData(self.store, self.campaign, self.seed)

    @property
    def name(self) -> str:
        return self.campaign.name

    def token(self, hit_key: str, attempt: int) -> str:
        raw = f"{self.name}|{self.instance}|{hit_key}|{attempt}"
        return hashlib.sha1(raw.encode("utf-8")).hexdigest()  # 40 chars, within MTurk's 64

    def annotation(self, stage: str, hit_key: str) -> str:
        return f"campaign={self.name};stage={stage};hit={hit_key};instance={self.instance}"

    def out_dir(self) -> Path:
        return private_dir(self.state_dir / self.name)


RowT = TypeVar("RowT", bound=SQLModel)


def get_row(session: Session, cls: type[RowT], key: Any) -> RowT:
    """A row the step knows exists (it read it earlier in this pass); missing means the store changed under us."""
    row = session.get(cls, key)
    if row is None:
        raise LookupError(f"{cls.__name__} {key!r} is missing from the store")
    return row


def remote_id(hit: HitRow) -> str:
    """The marketplace's id of a posted HIT."""
    if hit.hit_id is None:
        raise LookupError(f"HIT {hit.hit_key} has no marketplace id (status {hit.status})")
    return hit.hit_id
