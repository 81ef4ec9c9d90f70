"""Per-campaign leases: how several daemons sharing one PostgreSQL store divide the campaigns.

A daemon works a campaign only while it holds that campaign's lease and renews it on every tick. A
lease that is not renewed expires; another daemon then takes it over and resumes the campaign from the
store, exactly as a restarted daemon would. Acquiring is one conditional UPDATE (or an INSERT that the
primary key makes exclusive), so two daemons racing for one campaign cannot both win.
"""

from __future__ import annotations

import os
import socket
import uuid

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Field, Session, SQLModel


class LeaseRow(SQLModel, table=True):
    __tablename__ = "leases"

    campaign: str = Field(primary_key=True)
    holder: str
    expires_at: float
    acquired_at: float


def new_holder() -> str:
    """A name for this daemon that says where it runs (host and pid) and cannot repeat."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


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
