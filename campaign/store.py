"""The state store: every campaign, item, HIT, assignment, judgment, worker, ledger entry and event.

SQLite in WAL mode under `state/campaign.db` by default, any SQLAlchemy URL otherwise. Rows that stand
for a remote action carry a status that is written *before* the remote call ("posting", "approving") and
moved on after it, so a restart knows exactly which calls may or may not have happened. Uniqueness
constraints (one HIT per key, one charge per assignment, one judgment per assignment and item) make
replays harmless: a second insert of the same fact fails instead of counting twice.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Index, MetaData, UniqueConstraint, event, inspect, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DatabaseError, IntegrityError
from sqlmodel import Field, Session, SQLModel, col, create_engine, select

from campaign.filemodes import private_db, private_dir
from campaign.leases import LeaseRow  # noqa: F401  (its table is one of the store's: registered in the metadata here)
from campaign.migrations.prolific_files import LegacyFileError
from campaign.state import AssignmentStatus, CampaignStatus, HeldStatus, HitStatus

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

log = logging.getLogger(__name__)

MIGRATION_LOCK = 0x63616D70  # "camp": the PostgreSQL advisory lock key that serialises opening (and migrating) a store

# The version the previous releases' `create_all` stores are at (they carry no version table): opening
# one stamps it with this and migrates it on from there.
BASELINE = "0001"
# The newest revision in campaign/migrations/versions (a test checks they agree). Known here so that
# opening a store that is already at it needs no Alembic import, which costs a second of start-up on a
# busy machine for every `campaign status`.
SCHEMA_HEAD = "0007"


class StoreError(Exception):
    """The store cannot be used as it is: missing (read-only open), damaged, or from a newer `campaign`."""


class CampaignRow(SQLModel, table=True):
    __tablename__ = "campaigns"
    name: str = Field(primary_key=True)
    fingerprint: str
    spec_json: str
    status: str = CampaignStatus.RUNNING  # a CampaignStatus
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


# The HITs still to post, as SQL with the statuses as literals: the predicate of the partial index
# `ix_hits_campaign_pending`, and the condition `post_pending` reads drafts by (a bound parameter in its
# place would keep PostgreSQL's generic plan and SQLite from proving that the index covers the query).
PENDING_SQL = text(f"status IN ('{HitStatus.DRAFT.value}', '{HitStatus.POSTING.value}')")


class HitRow(SQLModel, table=True):
    """One planned HIT. `status` is a `HitStatus` (campaign.state: its states and their order)."""

    __tablename__ = "hits"
    __table_args__ = (UniqueConstraint("campaign", "hit_key"), Index("ix_hits_campaign_status", "campaign", "status", "stage"),
                      # the HITs still to post, oldest first (migration 0006; `steps.post.post_pending`)
                      Index("ix_hits_campaign_pending", "campaign", "id", postgresql_where=PENDING_SQL, sqlite_where=PENDING_SQL),
                      # a campaign's HITs of one status after an id: collect's sweep (migration 0007)
                      Index("ix_hits_campaign_status_id", "campaign", "status", "id"))
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    stage: str
    hit_key: str  # e.g. "likert-0007"; unique within the campaign
    batch: int = 0
    item_keys: str  # JSON list, in display order
    annotation: str  # RequesterAnnotation, unique to the draft
    token: str  # UniqueRequestToken, deterministic
    token_attempt: int = 0
    status: str = Field(default=HitStatus.DRAFT, index=True)  # a HitStatus
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
    """A submitted assignment. `status` is an `AssignmentStatus` (campaign.state: its states and their order)."""

    __tablename__ = "assignments"
    __table_args__ = (Index("ix_assignments_campaign_status", "campaign", "status", "valid"),
                      Index("ix_assignments_campaign_collected", "campaign", "collected_at"),
                      # a HIT's answers by status (close), a stage's by status (quality): migration 0006
                      Index("ix_assignments_campaign_hit_status", "campaign", "hit_key", "status"),
                      Index("ix_assignments_campaign_stage_status", "campaign", "stage", "status"))
    assignment_id: str = Field(primary_key=True)
    campaign: str = Field(index=True)
    stage: str
    hit_key: str = Field(index=True)
    hit_id: str
    worker_id: str = Field(index=True)
    status: str = Field(default=AssignmentStatus.SUBMITTED, index=True)
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

    `kind` is a `LedgerKind` (campaign.state: what each moves).
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


class HeldRow(SQLModel, table=True):
    """A row a step failed on, quarantined until the operator settles it (invariant 8).

    `row_kind` names what is held: an `assignment` (a submitted answer: its status is `held` too), a
    `hit` (a draft whose posting failed: its status is `held`), or a `bonus` (reserved, not sent). One
    row per held thing: holding it again changes nothing, so its event is written once.
    `status`: held -> settled. `decision` (approve | reject | drop) is the operator's, written by
    `campaign decide`; the daemon carries it out through the ledger and the marketplace and then writes
    `outcome` and `settled_at`. Holding moves no money: a held row's reservation stays until then.
    """

    __tablename__ = "held"
    __table_args__ = (UniqueConstraint("campaign", "row_kind", "row_key"), Index("ix_held_campaign_status", "campaign", "status"))
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    row_kind: str
    row_key: str
    step: str
    error: str
    hit_key: str | None = None
    worker_id: str | None = None
    held_at: float = Field(default_factory=time.time)
    status: str = HeldStatus.HELD
    decision: str | None = None
    message: str | None = None
    decided_at: float | None = None
    settled_at: float | None = None
    outcome: str | None = None
    data: str | None = None  # JSON: what settling needs (a bonus's amount and assignment, an interrupted call's intent)


class KVRow(SQLModel, table=True):
    """Small per-campaign state: cursors, online model snapshots. `key` is one of `campaign.state.Keys`."""

    __tablename__ = "kv"
    __table_args__ = (UniqueConstraint("campaign", "key"),)
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    key: str
    value: str


class ProlificStudyRow(SQLModel, table=True):
    """The Prolific adapter's journal of a study (`campaign.prolific.studies`): one per HIT type of a
    campaign (`key`), found again on Prolific by its unique `internal_name` after a crash. `state` is a
    `ProlificStudyState`, written before each call that changes the study; `places` as last set on Prolific."""

    __tablename__ = "prolific_studies"
    __table_args__ = (UniqueConstraint("campaign", "key"),)
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    key: str
    internal_name: str = Field(unique=True)
    completion_code: str
    study_id: str | None = None
    state: str
    places: int


class ProlificDecisionRow(SQLModel, table=True):
    """The journal of a decision sent to Prolific on a submission; `state` is a `ProlificDecisionState`."""

    __tablename__ = "prolific_decisions"
    __table_args__ = (UniqueConstraint("campaign", "submission_id"),)
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    submission_id: str
    action: str  # approve | reject
    state: str


class ProlificBonusRow(SQLModel, table=True):
    """The journal of one bonus to a submission (paying is not idempotent on Prolific): `state` is a
    `ProlificBonusState`, "paying" written before the pay call; `checking_since` is when reconciling a
    "paying" bonus started (wall time of the service), to give up on it after a bounded time."""

    __tablename__ = "prolific_bonuses"
    __table_args__ = (UniqueConstraint("campaign", "key"), Index("ix_prolific_bonuses_campaign_submission", "campaign", "submission_id"))
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    key: str
    study_id: str
    submission_id: str
    cents: int
    batch_id: str | None = None
    state: str
    checking_since: float | None = None


class ProlificPostedRow(SQLModel, table=True):
    """A HIT the Prolific adapter posted on the task site, with the HIT type (study) whose places cover it."""

    __tablename__ = "prolific_posted"
    __table_args__ = (UniqueConstraint("campaign", "hit_id"), Index("ix_prolific_posted_campaign_type", "campaign", "type_id"))
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    hit_id: str
    type_id: str
    assignments: int


class ProlificHitTypeRow(SQLModel, table=True):
    """A HIT type's title and description as the spec gave them: the study's name and description."""

    __tablename__ = "prolific_hit_types"
    __table_args__ = (UniqueConstraint("campaign", "type_id"),)
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    type_id: str
    title: str
    description: str


class ProlificVerdictRow(SQLModel, table=True):
    """A HIT's decision on the task site as the Prolific adapter noted it, for its submission's verdict."""

    __tablename__ = "prolific_verdicts"
    __table_args__ = (UniqueConstraint("campaign", "assignment_id"),)
    id: int | None = Field(default=None, primary_key=True)
    campaign: str = Field(index=True)
    assignment_id: str
    decision: str  # approve | reject
    reason: str


class ProlificHookRow(SQLModel, table=True):
    """The journal of a webhook subscription on Prolific (`campaign.prolific.hooks.ensure_subscription`):
    one per workspace, event type and target URL (one run's task site serves every campaign there). `state`:
    intent (written before the create call), created (its id known, not yet confirmed), confirmed. The
    signing secret is not kept: it is read from Prolific at each start."""

    __tablename__ = "prolific_hooks"
    __table_args__ = (UniqueConstraint("workspace_id", "event_type", "target_url"),)
    id: int | None = Field(default=None, primary_key=True)
    workspace_id: str
    event_type: str
    target_url: str
    subscription_id: str | None = None
    state: str


class ProlificHookMarkRow(SQLModel, table=True):
    """A verified webhook delivery as the task site received it: only which submission changed (and its
    study when the site knows it), for the Prolific campaigns' sweeps to read (`StudyWatch`). `event_id`
    and `sent_at` (the signed timestamp) make a replay recognisable."""

    __tablename__ = "prolific_hook_marks"
    id: int | None = Field(default=None, primary_key=True)
    event_id: str = Field(unique=True)
    submission_id: str
    study_id: str | None = None
    status: str
    sent_at: int
    received_at: float


PROLIFIC_TABLES = (ProlificStudyRow, ProlificDecisionRow, ProlificBonusRow, ProlificPostedRow, ProlificHitTypeRow, ProlificVerdictRow)
HOOK_TABLES = (ProlificHookRow, ProlificHookMarkRow)  # revision 0005: per run's task site, not per campaign


def move_status(session: Session, name: str, to: str, allowed_from: tuple[str, ...], **values: Any) -> bool:
    """Set campaign `name`'s status to `to` (and `values`, e.g. finished_at) only if it is one of
    `allowed_from`, in one conditional UPDATE; True if it was. Why: the daemon and the commands
    (`pause`, `cancel`, a budget raised) change a campaign's status from different processes, and a read
    followed by a write let the later one undo the other's (a cancel lost under a budget_exhausted
    written after a long export, a finished campaign made paused again)."""
    from sqlalchemy import update

    moved = session.exec(update(CampaignRow).where(col(CampaignRow.name) == name, col(CampaignRow.status).in_(allowed_from))
                         .values(status=to, **values))
    return bool(moved.rowcount)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across process crashes
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


STORE_TABLES = frozenset(str(row.__tablename__) for row in (CampaignRow, ItemRow, HitRow, AssignmentRow, JudgmentRow, WorkerRow,
                                                            LedgerRow, EventRow, KVRow, LeaseRow, HeldRow, *PROLIFIC_TABLES,
                                                            *HOOK_TABLES))


def metadata() -> MetaData:
    """The metadata the migrations are written against (the store's tables are among SQLModel's)."""
    return SQLModel.metadata


def alembic_config(url: str | None = None, connection: Connection | None = None, state_dir: Path | None = None) -> Config:
    """Alembic's configuration for the store, without an alembic.ini: the scripts ship in the package.
    `state_dir` is where a revision finds files of earlier releases to read in (revision 0004)."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("campaign.migrations")))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["connection"] = connection
    cfg.attributes["state_dir"] = state_dir
    return cfg


@functools.cache
def _script() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def schema_head() -> str:
    """The schema version this `campaign` writes."""
    return SCHEMA_HEAD


class Store:
    """Owns the engine; `session()` yields a transaction that commits on success.

    Opening migrates the schema to this version's head: an empty database gets every table, a store
    written before stores carried a version (by `create_all`) is stamped as the baseline first, and a
    store from a newer `campaign` is refused rather than misread. `state_dir` is the state folder the
    store serves (a SQLite store's own folder unless given): an upgrade reads into the store what
    earlier releases kept in files there (`campaign.migrations.prolific_files`).
    """

    def __init__(self, url: str, state_dir: Path | None = None) -> None:
        self.url = url
        self.state_dir = state_dir
        kwargs: dict[str, Any] = {}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
            u = make_url(url)
            if u.database not in (None, "", ":memory:") and not str(u.database).startswith("file:"):
                private_db(u.database)  # answers and worker ids: readable by the owner only
                if self.state_dir is None:
                    self.state_dir = Path(u.database).parent
        self.engine: Engine = create_engine(url, **kwargs)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        try:
            self._check_and_migrate()
        except StoreError:
            self.engine.dispose()
            raise
        except LegacyFileError as exc:
            self.engine.dispose()
            raise StoreError(str(exc)) from None
        except DatabaseError as exc:
            self.engine.dispose()
            raise StoreError(self._damaged(str(getattr(exc, "orig", None) or exc))) from None

    @property
    def where(self) -> str:
        """The store's address as shown to a user (no password)."""
        u = make_url(self.url)
        return str(u.database) if u.drivername.startswith("sqlite") else u.render_as_string(hide_password=True)

    def _damaged(self, what: str) -> str:
        if self.url.startswith("sqlite"):
            if self._not_writable():  # a sound store on a read-only disk is not to be restored or moved away
                return (f"{self.where}: cannot open the store ({what.strip()}): it or its folder is not writable, "
                        "and SQLite writes beside a store even to read it (its -wal and -shm files); copy the "
                        "state folder somewhere writable to read it there")
            return (f"{self.where}: the store is damaged or not a campaign store ({what.strip()}); "
                    "restore it from a backup, or move it away to start afresh")
        return f"{self.where}: cannot open the store ({what.strip()})"

    def _not_writable(self) -> bool:
        import os

        db = Path(str(make_url(self.url).database or ""))
        if not db.name or not db.exists():
            return False
        return not (os.access(db, os.W_OK) and os.access(db.parent, os.W_OK))

    def _check_and_migrate(self) -> None:
        with self.engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                # several daemons started at once on a fresh server database would all create the tables
                # (the losers die on "already exists"): one migrates at a time, the others then find it
                # done. A transaction-level advisory lock: released with the commit, or when a killed
                # process's connection goes.
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
            if conn.dialect.name == "sqlite":
                problems = [line.strip() for r in conn.execute(text("PRAGMA quick_check")).fetchall()
                            for line in str(r[0]).splitlines() if line.strip() and not line.startswith("***")]
                if problems != ["ok"]:
                    raise StoreError(self._damaged("; ".join(problems[:3]) + (" ..." if len(problems) > 3 else "")))
            tables = set(inspect(conn).get_table_names())
            current: tuple[str, ...] = ()
            if "alembic_version" in tables:
                current = tuple(str(r[0]) for r in conn.execute(text("SELECT version_num FROM alembic_version")))
            if current == (SCHEMA_HEAD,):
                return
            if conn.dialect.name == "sqlite":
                # pysqlite runs DDL outside any transaction unless one is begun: a process killed mid-way
                # would leave some tables and no version, which the next open takes for the baseline.
                # One immediate transaction makes the migration all or nothing; look again once it holds
                # the lock, another process may have migrated meanwhile.
                conn.exec_driver_sql("BEGIN IMMEDIATE")
                tables = set(inspect(conn).get_table_names())
                current = ()
                if "alembic_version" in tables:
                    current = tuple(str(r[0]) for r in conn.execute(text("SELECT version_num FROM alembic_version")))
                if current == (SCHEMA_HEAD,):
                    return
            self._migrate(conn, current, "campaigns" in tables)

    def _migrate(self, conn: Connection, current: tuple[str, ...], has_tables: bool) -> None:
        from alembic import command
        from alembic.util.exc import CommandError

        for version in current:
            try:
                known = _script().get_revision(version)
            except CommandError:
                known = None
            if known is None:
                raise StoreError(
                    f"{self.where}: the store's schema version {version!r} is newer than this campaign knows "
                    f"(it knows up to {SCHEMA_HEAD!r}); upgrade campaign, or use another --state/--db")
        cfg = alembic_config(self.url, conn, self.state_dir)
        if not current and has_tables:
            log.info("store %s has no schema version: stamping it as the baseline %s", self.where, BASELINE)
            command.stamp(cfg, BASELINE)
            current = (BASELINE,)
        if current != (SCHEMA_HEAD,):
            log.info("store %s: migrating schema %s -> %s", self.where, ",".join(current) or "(empty)", SCHEMA_HEAD)
            command.upgrade(cfg, "head")

    def schema_version(self) -> str | None:
        """The store's schema version (None before stores carried one)."""
        with self.engine.connect() as conn:
            if "alembic_version" not in inspect(conn).get_table_names():
                return None
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()

    @classmethod
    def open(cls, state_dir: str | Path, db: str | None = None, *, create: bool = True) -> Store:
        """The store under `state_dir` (SQLite) or at URL `db`. With `create=False` (read-only commands) a
        missing SQLite store is an error and nothing is created, not even the folder."""
        if db:
            if not create:
                u = make_url(db)
                if u.drivername.startswith("sqlite") and u.database not in (None, "", ":memory:") \
                        and not Path(u.database).is_file():
                    raise StoreError(f"no store at {u.database}; `campaign run` creates it")
            return cls(db, Path(state_dir))
        p = Path(state_dir)
        f = p / "campaign.db"
        if not create:
            if not f.is_file():
                raise StoreError(f"no store at {f}; `campaign run` creates it (or give --state/--db)")
        else:
            private_dir(p)
        return cls(f"sqlite:///{f}", p)

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
        logging.getLogger("campaign.events").log(getattr(logging, level.upper(), logging.INFO), "%s %s: %s", campaign, kind, message)
        row = EventRow(campaign=campaign, kind=kind, message=message, level=level, subject=subject,
                       data=json.dumps(data, sort_keys=True, default=str) if data is not None else None)
        if session is not None:
            session.add(row)
            return
        with self.session() as s:
            s.add(row)

    def get_kv(self, campaign: str, key: str, default: str | None = None, session: Session | None = None) -> str | None:
        def get(s: Session) -> str | None:
            row = s.exec(select(KVRow).where(KVRow.campaign == campaign, KVRow.key == key)).first()
            return row.value if row else default

        if session is not None:
            return get(session)
        with self.session() as s:
            return get(s)

    def swap_kv(self, campaign: str, key: str, expected: str | None, value: str, session: Session | None = None) -> bool:
        """Set `key` to `value` only if it still holds `expected` (None: only if it is absent), in one
        conditional statement; True if it did. Why: `campaign extend` adds to an intent the daemon is
        carrying out and then clears, from another process; a read followed by a write lost the hours
        asked for in between."""
        from sqlalchemy import update

        def put(s: Session) -> bool:
            if expected is None:
                if s.exec(select(KVRow.id).where(KVRow.campaign == campaign, KVRow.key == key)).first() is not None:
                    return False
                try:
                    with s.begin_nested():
                        s.add(KVRow(campaign=campaign, key=key, value=value))
                except IntegrityError:  # another process inserted it first
                    return False
                return True
            moved = s.exec(update(KVRow).where(col(KVRow.campaign) == campaign, col(KVRow.key) == key,
                                               col(KVRow.value) == expected).values(value=value))
            return bool(moved.rowcount)

        if session is not None:
            return put(session)
        with self.session() as s:
            return put(s)

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
