"""Per-campaign leases: how several daemons sharing one PostgreSQL store divide the campaigns.

A daemon works a campaign only while it holds that campaign's lease and renews it on every tick. A
lease that is not renewed expires; another daemon then takes it over and resumes the campaign from the
store, exactly as a restarted daemon would. Acquiring is one conditional UPDATE (or an INSERT that the
primary key makes exclusive), so two daemons racing for one campaign cannot both win.
"""

from __future__ import annotations

import hashlib
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Field, Session, SQLModel, select


class LeaseRow(SQLModel, table=True):
    __tablename__ = "leases"

    campaign: str = Field(primary_key=True)
    holder: str
    expires_at: float
    acquired_at: float


def _process_space() -> str:
    """This machine's boot and PID namespace: two holders with the same value see the same processes, so
    one may tell from a pid whether the other is still running. Empty where it cannot be known."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:12]
        ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return f"{boot}.{ns}"


def new_holder() -> str:
    """A name for this daemon that says where it runs (host, pid, process space) and cannot repeat."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}:{_process_space()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def dead_neighbour(holder: str, me: str) -> bool:
    """True only when `holder` is certainly dead: a daemon of this host, boot and PID namespace whose
    process is gone. Anything else (another machine, an old-style name, an unknown space) is left to
    expire: taking a lease early is only safe when its holder cannot be running."""
    theirs, mine = holder.split(":"), me.split(":")
    if len(theirs) != 4 or len(mine) != 4 or not mine[3]:
        return False
    if (theirs[0], theirs[3]) != (mine[0], mine[3]) or not theirs[1].isdigit():
        return False
    pid = int(theirs[1])
    return pid != os.getpid() and not _alive(pid)


def reap_dead_neighbours(session: Session, me: str, now: float) -> list[str]:
    """Expire at once the leases of daemons that died on this machine (a restarted daemon then resumes
    its own campaigns without waiting a TTL for its dead predecessor). Returns the campaigns freed."""
    rows = session.exec(select(LeaseRow).where(LeaseRow.expires_at >= now)).all()
    freed = []
    for r in rows:
        if r.holder != me and dead_neighbour(r.holder, me):
            stmt = (update(LeaseRow).where(LeaseRow.campaign == r.campaign)  # type: ignore[arg-type]
                    .where(LeaseRow.holder == r.holder).values(expires_at=0.0))  # type: ignore[arg-type]
            if session.exec(stmt).rowcount:
                freed.append(r.campaign)
    session.commit()
    return freed


def try_acquire(session: Session, campaign: str, holder: str, now: float, ttl: float) -> bool:
    """Take or renew the lease; True if `holder` holds it until `now + ttl`. Commits."""
    stmt = (update(LeaseRow).where(LeaseRow.campaign == campaign)  # type: ignore[arg-type]
            .where((LeaseRow.holder == holder) | (LeaseRow.expires_at < now))  # type: ignore[arg-type]
            .values(holder=holder, expires_at=now + ttl))
    if session.exec(stmt).rowcount:
        session.commit()
        return True
    session.rollback()
    if session.get(LeaseRow, campaign) is not None:
        return False
    session.add(LeaseRow(campaign=campaign, holder=holder, expires_at=now + ttl, acquired_at=now))
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        return False
    return True


def release(session: Session, campaign: str, holder: str) -> None:
    """Give the lease up at once (a clean stop), so another daemon need not wait for it to expire."""
    stmt = (update(LeaseRow).where(LeaseRow.campaign == campaign)  # type: ignore[arg-type]
            .where(LeaseRow.holder == holder).values(expires_at=0.0))  # type: ignore[arg-type]
    session.exec(stmt)
    session.commit()


def holder_of(session: Session, campaign: str, now: float) -> str | None:
    row = session.get(LeaseRow, campaign)
    return row.holder if row is not None and row.expires_at >= now else None


#: A daemon's presence is a lease on this prefix plus its holder name: the number of live daemons is
#: the number of unexpired presence rows, which is how each knows its fair share of the campaigns.
PRESENCE = "@daemon:"


class LeaseKeeper:
    """One daemon's side of the leases: renews what it holds (before each tick and on every rebalance,
    so a lease lapses only when its process stops), and every so often takes or gives back
    campaigns so that each live daemon works about the same number (ceil(active / live daemons)).

    Only wall-clock time is used (`time.time()`), never a simulated clock: expiry must mean "the
    holder really stopped", whatever speed a simulation runs at. Each call opens its own short session.
    """

    def __init__(self, session_factory: Callable[[], AbstractContextManager[Session]], ttl: float,
                 holder: str | None = None, now: Callable[[], float] = time.time) -> None:
        if ttl <= 0:
            raise ValueError(f"lease TTL must be positive, got {ttl}")
        self.session = session_factory
        self.ttl = float(ttl)
        self.holder = holder or new_holder()
        self.now = now
        self.held: set[str] = set()
        self.leaving: set[str] = set()  # held, but to be given back before their next tick
        self._mutex = threading.RLock()  # a renewal must not revive a lease being given back

    def renew(self, campaign: str) -> bool:
        """Before each tick, under the lock the campaign's ticks hold: True if this daemon still holds
        `campaign` (now for another TTL). A campaign marked surplus by `balance` is given back here,
        between two ticks, so no tick of it is under way when another daemon may take it."""
        with self._mutex:
            if campaign not in self.held:
                return False
            if campaign in self.leaving:
                self.give_back(campaign)
                return False
            with self.session() as s:
                ok = try_acquire(s, campaign, self.holder, self.now(), self.ttl)
            if not ok:
                self.held.discard(campaign)
            return ok

    def heartbeat(self) -> None:
        """Renew this daemon's presence and every lease it holds; run from its own thread every third
        of a TTL, so a lease lapses only when the process stops (or cannot reach the store), never
        because a tick or a rebalance waiting for one took long."""
        with self.session() as s:
            try_acquire(s, PRESENCE + self.holder, self.holder, self.now(), self.ttl)
        for name in sorted(self.held):
            with self._mutex:
                if name in self.held:
                    with self.session() as s:
                        if not try_acquire(s, name, self.holder, self.now(), self.ttl):
                            self.held.discard(name)

    def live_daemons(self) -> int:
        now = self.now()
        with self.session() as s:
            rows = s.exec(select(LeaseRow).where(LeaseRow.campaign.startswith(PRESENCE))).all()
            return max(1, sum(1 for r in rows if r.expires_at >= now))

    def balance(self, active: Sequence[str], finished: Sequence[str] = ()) -> tuple[list[str], list[str]]:
        """Renew presence, give back finished campaigns, mark the surplus over the fair share to be given
        back (by `renew`, before its next tick), take free ones up to the fair share. Never waits for a
        tick. Returns (acquired, surplus)."""
        with self.session() as s:
            reap_dead_neighbours(s, self.holder, self.now())
        self.heartbeat()
        for name in sorted(self.held & set(finished)):  # a finished campaign's tick does nothing
            self.give_back(name)
        fair = math.ceil(len(active) / self.live_daemons()) if active else 0
        mine = sorted(self.held & set(active) - self.leaving, key=self._preference)
        surplus = mine[fair:]  # the least preferred go, so daemons settle rather than swap
        self.leaving.update(surplus)
        acquired = []
        for name in sorted(set(active) - self.held, key=self._preference):
            if len(self.held & set(active) - self.leaving) >= fair:
                break
            with self._mutex, self.session() as s:
                if try_acquire(s, name, self.holder, self.now(), self.ttl):
                    self.held.add(name)
                    acquired.append(name)
        return acquired, surplus

    def give_back(self, campaign: str) -> None:
        with self._mutex:
            self.held.discard(campaign)
            self.leaving.discard(campaign)
            with self.session() as s:
                release(s, campaign, self.holder)

    def release_all(self) -> None:
        """A clean stop: others take over at once instead of after a TTL."""
        for name in sorted(self.held):
            self.give_back(name)
        with self.session() as s:
            release(s, PRESENCE + self.holder, self.holder)

    def _preference(self, campaign: str) -> str:
        """Each daemon prefers a different (stable, pseudo-random) order of campaigns, so two daemons
        starting together reach for different ones first."""
        return hashlib.sha256(f"{self.holder}|{campaign}".encode()).hexdigest()
