"""The Prolific door served by a standalone marketplace (`campaign market serve --prolific-door`), so
that several daemons share one task site and a daemon's death does not take it down: the door asks
Prolific about each participant itself, and, given the campaigns' store, knows each HIT's items and
refuses answers the task kind cannot read. Run wiring: it puts the servers' door together with the
Prolific client and the providers' store readers, which the server package itself may not import.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from campaign.market.door_remote import DoorOperations
from campaign.market.server import DoorStartError

if TYPE_CHECKING:
    from campaign.market.server import RunningMarket

__all__ = ["DoorStartError", "market_serve", "serve_door"]


def serve_door(market: RunningMarket, state_dir: Path, *, db: str | None = None, config: str | None = None) -> Callable[[], None]:
    """Mount a Prolific door on `market`'s worker site and answer its operations on the requester
    endpoint; returns what closes it. The door asks Prolific (`PROLIFIC_TOKEN`, `PROLIFIC_BASE_URL`)
    whether each participant's submission is active, as a daemon's own door does.

    With `db` (the campaigns' store) the door knows each HIT's items; the store is opened at the first
    question, by then a daemon has made it (opening it earlier would race the daemons' migrations).
    With `config` too, an answer the HIT's task kind cannot read is refused at the door."""
    from campaign.market.prolific_site import ProlificDoor
    from campaign.prolific.client import ProlificClient

    if not os.environ.get("PROLIFIC_TOKEN"):
        raise DoorStartError("--prolific-door asks Prolific about each participant: set PROLIFIC_TOKEN (and "
                             "PROLIFIC_BASE_URL for an emulator)")
    if config and not db:
        raise DoorStartError("--door-config needs --door-db (the answers are checked against the HITs in the store)")
    campaigns: list[Any] = []
    if config:
        from campaign.spec import SpecError, load_spec

        try:
            campaigns = list(load_spec(config).campaigns)
        except SpecError as exc:
            raise DoorStartError("--door-config: " + "; ".join(exc.problems)) from None
    lazy = _LazyStore(state_dir / "door-store", db) if db else None
    items_of = check_answer = None
    if lazy is not None:
        lazy_store = lazy

        def items_of(hit_id: str) -> frozenset[str]:
            from campaign.providers.prolific import store_items_of

            return store_items_of(lazy_store.get())(hit_id)

        if campaigns:
            def check_answer(hit_id: str, fields: list[tuple[str, str]]) -> None:
                from campaign.providers.prolific import store_answer_check

                store_answer_check(lazy_store.get(), campaigns)(hit_id, fields)
    door = ProlificDoor(market.engine, market.site_config, state_dir / "prolific-site", ProlificClient(max_retries=3, timeout=30.0),
                        items_of=items_of, check_answer=check_answer)
    market.mount("/prolific/", door)
    market.core.door_ops = DoorOperations(door)

    def close() -> None:
        market.core.door_ops = None
        door.close()
        if lazy is not None:
            lazy.close()
    return close


class _LazyStore:
    """The campaigns' store, opened at first use (one connection pool for the door's process)."""

    def __init__(self, state_dir: Path, db: str) -> None:
        self.state_dir, self.db = state_dir, db
        self._store: Any = None
        self._lock = threading.Lock()

    def get(self) -> Any:
        with self._lock:
            if self._store is None:
                from campaign.store import Store

                self._store = Store.open(self.state_dir, self.db)
            return self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


def market_serve(argv: list[str]) -> int:
    """`campaign market serve`, able to serve the Prolific door (`--prolific-door`)."""
    from campaign.market.server import main

    return main(argv, door=serve_door)
