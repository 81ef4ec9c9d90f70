"""The state store: every campaign, item, HIT, assignment, judgment, worker, ledger entry and event.

SQLite in WAL mode under `state/campaign.db` by default, any SQLAlchemy URL otherwise. Rows that stand
for a remote action carry a status that is written *before* the remote call ("posting", "approving") and
moved on after it, so a restart knows exactly which calls may or may not have happened. Uniqueness
constraints (one HIT per key, one charge per assignment, one judgment per assignment and item) make
replays harmless: a second insert of the same fact fails instead of counting twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Index, UniqueConstraint, event
from sqlalchemy.engine import Engine
from sqlmodel import Field, Session, SQLModel, create_engine, select


class CampaignRow(SQLModel, table=True):
    __tablename__ = "campaigns"
    name: str = Field(primary_key=True)
    fingerprint: str
    spec_json: str
    status: str = "running"  # running | paused | cancelled | finished
    seed: int = 0
    budget: str = "0.00"
    created_at: float = Field(default_factory=time.time)
    finished_at: float | None = None


class ItemRow(SQLModel, table=True):
    __tablename__ = "items"
    __table_args__ = (UniqueConstraint("campaign", "item_key"),)
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    item_key: str
    text: str
    doc: str | None = None
    position: int = 0
    is_trap: bool = False


class HitRow(SQLModel, table=True):
    """One planned HIT. `status`: draft -> posting -> posted -> closed | failed | cancelled."""

    __tablename__ = "hits"
    __table_args__ = (UniqueConstraint("campaign", "hit_key"), Index("ix_hits_campaign_status", "campaign", "status", "stage"))
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    stage: str
    hit_key: str  # e.g. "likert-0007"; unique within the campaign
    batch: int = 0
    item_keys: str  # JSON list, in display order
    annotation: str  # RequesterAnnotation, unique to the draft
    token: str  # UniqueRequestToken, deterministic
    token_attempt: int = 0
    status: str = Field(default="draft", index=True)
    reward: str
    assignments: int
    reserved: str = "0.00"
    hit_id: str | None = Field(default=None, index=True)
    hit_type_id: str | None = None
    posting_started_at: float | None = None
    posted_at: float | None = None
    expires_at: float | None = None
    closed_at: float | None = None
    error: str | None = None

    def keys(self) -> list[str]:
        return json.loads(self.item_keys)


class AssignmentRow(SQLModel, table=True):
    """A submitted assignment. `status`: submitted -> approving -> approved | rejecting -> rejected."""

    __tablename__ = "assignments"
    __table_args__ = (Index("ix_assignments_campaign_status", "campaign", "status", "valid"),
                      Index("ix_assignments_campaign_collected", "campaign", "collected_at"))
    assignment_id: str = Field(primary_key=True)
    campaign: str = Field(index=True)
    stage: str
    hit_key: str = Field(index=True)
    hit_id: str
    worker_id: str = Field(index=True)
    status: str = Field(default="submitted", index=True)
    answer_xml: str
    valid: bool = True
    error: str | None = None
    accept_time: float | None = None
    submit_time: float | None = None
    collected_at: float = Field(default_factory=time.time)
    decided_at: float | None = None
    feedback: str | None = None


class JudgmentRow(SQLModel, table=True):
    """One label: a worker's value for one item (Likert score, rank position, ...)."""

    __tablename__ = "judgments"
    __table_args__ = (UniqueConstraint("assignment_id", "item_key"), Index("ix_judgments_campaign_excluded", "campaign", "excluded"))
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    stage: str
    assignment_id: str = Field(index=True)
    worker_id: str = Field(index=True)
    item_key: str
    value: float
    extra: str | None = None  # JSON for task-specific detail
    excluded: bool = False  # kept, but left out of aggregation by quality control


class WorkerRow(SQLModel, table=True):
    __tablename__ = "workers"
    __table_args__ = (UniqueConstraint("campaign", "worker_id"),)
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    worker_id: str
    first_seen: float = Field(default_factory=time.time)
    assignments: int = 0
    excluded: bool = False
    blocked: bool = False
    reason: str | None = None
    evidence: str | None = None  # JSON


class LedgerRow(SQLModel, table=True):
    """Money movements. `ref` is unique per campaign, so replaying an action cannot book it twice.

    kinds: reserve (+reserved), charge (-reserved, +spent), release (-reserved),
           bonus_reserve, bonus_charge, bonus_release (the same for bonuses).
    """

    __tablename__ = "ledger"
    __table_args__ = (UniqueConstraint("campaign", "ref"), Index("ix_ledger_campaign_kind", "campaign", "kind", "amount", "fee"),
                      Index("ix_ledger_campaign_hit", "campaign", "hit_key"))
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    ref: str
    kind: str
    amount: str  # Decimal as string
    fee: str = "0.00"  # the marketplace fee inside `amount`
    hit_key: str | None = None
    assignment_id: str | None = None
    created_at: float = Field(default_factory=time.time)
    note: str | None = None


class EventRow(SQLModel, table=True):
    __tablename__ = "events"
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    ts: float = Field(default_factory=time.time)
    level: str = "info"  # info | warning | error
    kind: str
    subject: str | None = None
    message: str
    data: str | None = None  # JSON evidence


class KVRow(SQLModel, table=True):
    """Small per-campaign state: cursors, online model snapshots."""

    __tablename__ = "kv"
    __table_args__ = (UniqueConstraint("campaign", "key"),)
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    key: str
    value: str


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


class Store:
    """Owns the engine; `session()` yields a transaction that commits on success."""

    def __init__(self, url: str) -> None:
        self.url = url
        kwargs: dict[str, Any] = {}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        self.engine: Engine = create_engine(url, **kwargs)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        SQLModel.metadata.create_all(self.engine)

    @classmethod
    def open(cls, state_dir: str | Path, db: str | None = None) -> Store:
        if db:
            return cls(db)
        p = Path(state_dir)
        p.mkdir(parents=True, exist_ok=True)
        return cls(f"sqlite:///{p / 'campaign.db'}")

    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as s:
            try:
                yield s
                s.commit()
            except BaseException:
                s.rollback()
                raise

    def close(self) -> None:
        self.engine.dispose()

    # --- small helpers used across modules ------------------------------------------------------------
    def event(self, campaign: str, kind: str, message: str, *, level: str = "info", subject: str | None = None,
              data: dict[str, Any] | None = None, session: Session | None = None) -> None:
        row = EventRow(campaign=campaign, kind=kind, message=message, level=level, subject=subject,
                       data=json.dumps(data, sort_keys=True, default=str) if data is not None else None)
        if session is not None:
            session.add(row)
            return
        with self.session() as s:
            s.add(row)

    def get_kv(self, campaign: str, key: str, default: str | None = None) -> str | None:
        with self.session() as s:
            row = s.exec(select(KVRow).where(KVRow.campaign == campaign, KVRow.key == key)).first()
            return row.value if row else default

    def set_kv(self, campaign: str, key: str, value: str, session: Session | None = None) -> None:
        def put(s: Session) -> None:
            row = s.exec(select(KVRow).where(KVRow.campaign == campaign, KVRow.key == key)).first()
            if row is None:
                s.add(KVRow(campaign=campaign, key=key, value=value))
            else:
                row.value = value
                s.add(row)

        if session is not None:
            put(session)
        else:
            with self.session() as s:
                put(s)
