"""What only the marketplace's operator may do: add requester accounts, add workers with the profile
they are known to have, and issue the sign-in codes those workers use.

A worker never declares country, approval figures or Masters: the operator sets them here (or work on
this marketplace earns them). The in-process marketplaces started by `start_market` register their
operator under their URL, so a simulated crowd in the same process can add its workers the way an
operator would, without any network route that lets a worker do it.
"""

from __future__ import annotations

import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from campaign.credentials import Credentials
from campaign.market.accounts import CODE_TTL, Accounts
from campaign.market.engine import Engine


@dataclass(frozen=True)
class WorkerProfile:
    country: str = "US"
    subdivision: str | None = None
    approval: int = 100  # prior percent of assignments approved elsewhere
    approved: int = 0  # prior number of HITs approved elsewhere
    masters: bool = False


class Operator:
    def __init__(self, engine: Engine, accounts: Accounts, worker_url: str | None = None) -> None:
        self.engine = engine
        self.accounts = accounts
        self.worker_url = worker_url

    def add_account(self, name: str) -> Credentials:
        return self.accounts.add_account(name)

    def add_worker(self, worker_id: str, profile: WorkerProfile | None = None, ttl: float = CODE_TTL) -> str:
        """Creates or updates the worker and returns a fresh sign-in code (earlier codes stop working)."""
        p = profile or WorkerProfile()
        locale: dict[str, Any] = {"Country": p.country}
        if p.subdivision:
            locale["Subdivision"] = p.subdivision
        self.engine.worker("register", {"WorkerId": worker_id, "Locale": locale, "PercentAssignmentsApproved": int(p.approval),
                                        "NumberHITsApproved": int(p.approved), "Masters": bool(p.masters)})
        return self.accounts.issue_code(worker_id, ttl)

    def knows_worker(self, worker_id: str) -> bool:
        """Whether this marketplace has a worker of that id (added by the operator or registered)."""
        return bool(self.engine.worker("known", worker_id))

    def revoke_worker(self, worker_id: str) -> int:
        """Ends every session of the worker (and their sign-in code); `add_worker` issues a new code."""
        return self.accounts.revoke_worker(worker_id)

    def signin_link(self, code: str, worker_url: str | None = None) -> str:
        base = (worker_url or self.worker_url or "").rstrip("/")
        return f"{base}/signin?{urllib.parse.urlencode({'code': code})}"


_lock = threading.Lock()
_in_process: dict[str, Operator] = {}


def _key(url: str) -> str:
    return url.rstrip("/")


def register_in_process(url: str, op: Operator) -> None:
    with _lock:
        _in_process[_key(url)] = op


def unregister_in_process(url: str) -> None:
    with _lock:
        _in_process.pop(_key(url), None)


def in_process(url: str) -> Operator | None:
    """The operator of a marketplace this process started at `url`, if any."""
    with _lock:
        return _in_process.get(_key(url))


def offline(state_dir: Path, worker_url: str | None = None) -> tuple[Operator, Any]:
    """An operator working directly on a marketplace's state directory (the server may be running: SQLite
    serializes the writes). Returns the operator and a `close()` callable."""
    from campaign.market.db import Database

    db = Database(Path(state_dir))
    accounts = Accounts(Path(state_dir))
    op = Operator(Engine(db), accounts, worker_url)

    def close() -> None:
        accounts.close()
        db.close()

    return op, close
