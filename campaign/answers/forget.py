"""`campaign forget WORKER`: erase a person's answers' personal data from the store on request.

What goes: every occurrence of the person's id (a worker id, a Prolific participant id, or the task
site's `AP...` id made from it) in any text column of any table, replaced by a tombstone
(`forgotten-` and 12 random hex digits, one per campaign, unrelated to the id and to the campaign's
pseudonym, so nothing in the store leads back to the person); the raw answers they submitted (the
answer XML, where free-text comments live) and the free text a task kind keeps in a judgment
(`TaskKind.free_text_extra`, e.g. a nugget worker's keywords).

What stays: the labels (item, value, spans) under the tombstone, so scores and gold nuggets do not
change, and every ledger row with its amount and fee untouched. The ledger's only reference to a person
is inside a bonus's `ref` (`bonus_reserve:<worker>` ...) and the matching `kv` key `bonus:<worker>`;
both get the same tombstone, so the refs stay unique (a replayed action still books nothing twice),
the bonus still reads as paid (a later pass pays nobody again), and totals stay to the cent. Deleting
those rows instead would make the books disagree with what the marketplace paid; keeping the id would
keep the person. Money columns are never rewritten.

The marketplace's own records (MTurk's, Prolific's, or the built-in marketplace's database under the
state folder) are not the campaign store: the command names files under --state that still hold the id.
The command refuses while a daemon runs on the store (`campaign.answers.cli`): a running daemon's
memory may still hold the id.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Column, String, Table, or_, update
from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from campaign import tasks
from campaign.answers.pseudonyms import PREFIX, SECRET_KEY, pseudonym
from campaign.prolific.gate import site_worker_id
from campaign.store import (
    STORE_TABLES,
    AssignmentRow,
    CampaignRow,
    HeldRow,
    JudgmentRow,
    KVRow,
    Store,
    WorkerRow,
    metadata,
)

TOMBSTONE = "forgotten-"
MONEY_COLUMNS = frozenset({"amount", "fee", "budget", "reward", "reserved"})
MIN_ID = 4  # a shorter "id" would match inside unrelated text


class ForgetError(Exception):
    pass


@dataclass
class Forgotten:
    """What was done: the tombstone each campaign's rows now carry and how many cells changed per table."""

    tombstones: dict[str, str] = field(default_factory=dict)
    cells: dict[str, int] = field(default_factory=dict)
    answers_cleared: int = 0


def identities(given: str) -> set[str]:
    """The forms an id takes in the store: as given, and the task site's id of a Prolific participant."""
    out = {given}
    if not given.startswith("AP"):
        out.add(site_worker_id(given))
    return out


def resolve_pseudonym(store: Store, given: str) -> set[str]:
    """The worker ids whose pseudonym (in some campaign) is `given`: a request may quote an export."""
    if not given.startswith(PREFIX):
        return set()
    found: set[str] = set()
    with store.session() as s:
        secrets_by_campaign = dict(s.exec(select(KVRow.campaign, KVRow.value).where(KVRow.key == SECRET_KEY)).all())
        for camp, secret in secrets_by_campaign.items():
            for wid in s.exec(select(WorkerRow.worker_id).where(WorkerRow.campaign == camp)).all():
                if pseudonym(bytes.fromhex(secret), wid) == given:
                    found.add(wid)
    return found


def _pattern(ids: Iterable[str]) -> re.Pattern[str]:
    alts = "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9])(?:{alts})(?![A-Za-z0-9])")


def _like(value: str) -> str:
    return "%" + value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def forget(store: Store, ids: set[str], campaign: str | None = None) -> Forgotten:
    """Erase `ids` from the store (from one campaign's rows when `campaign` is given), in one transaction."""
    short = sorted(i for i in ids if len(i) < MIN_ID)
    if short:
        raise ForgetError(f"{short[0]!r} is too short to be a worker id (ids have at least {MIN_ID} characters)")
    if any(i.startswith(TOMBSTONE) for i in ids):
        raise ForgetError("that is a tombstone: the person was already forgotten")
    done = Forgotten()
    pattern = _pattern(ids)
    sqlite = store.url.startswith("sqlite")
    with store.session() as s:
        if not _known(s, ids, campaign):
            where = f"campaign {campaign!r}" if campaign is not None else "any campaign"
            shown = next((i for i in sorted(ids) if not i.startswith("AP")), sorted(ids)[0])  # as given, not the site's form
            raise ForgetError(f"{shown!r} is no worker or participant of {where} in the store (give a worker id, "
                              "a Prolific participant id, or a pseudonym from an answers export); nothing was changed")
        if sqlite:  # what is overwritten or deleted is zeroed in the file, not left in free pages
            s.connection().exec_driver_sql("PRAGMA secure_delete=ON")
        _clear_answers(s, ids, campaign, done)
        for table in metadata().sorted_tables:
            if table.name in STORE_TABLES:
                _rewrite(s, table, ids, pattern, campaign, done)
        for camp in sorted(done.tombstones):
            store.event(camp, "forgotten", f"a worker's personal data was erased on request; their answers are kept "
                        f"under {done.tombstones[camp]}", session=s)
    if sqlite and done.tombstones:
        with store.engine.connect() as conn:  # the old pages leave the write-ahead log for the (zeroed) file
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    return done


def _known(s: Session, ids: set[str], campaign: str | None) -> bool:
    """Whether some row names one of `ids` as the person who did the work. Why: the rewrite replaces the
    id wherever it stands as a word, so a string that is not a person's id (a campaign's name, a status
    such as `approved`, a stage) would otherwise be rewritten wherever it occurs, and the store broken."""
    for table in (WorkerRow, AssignmentRow, JudgmentRow, HeldRow):
        q = select(table.worker_id).where(col(table.worker_id).in_(ids))
        if campaign is not None:
            q = q.where(table.campaign == campaign)
        if s.exec(q.limit(1)).first() is not None:
            return True
    return False


def _tombstone(done: Forgotten, campaign: str) -> str:
    if campaign not in done.tombstones:
        done.tombstones[campaign] = TOMBSTONE + secrets.token_hex(6)
    return done.tombstones[campaign]


def _clear_answers(s: Session, ids: set[str], campaign: str | None, done: Forgotten) -> None:
    """The person's raw answers go, and the free text their judgments keep (per the stage's kind)."""
    q = select(AssignmentRow).where(col(AssignmentRow.worker_id).in_(ids))
    if campaign is not None:
        q = q.where(AssignmentRow.campaign == campaign)
    assignments = list(s.exec(q).all())
    kinds: dict[tuple[str, str], tuple[str, ...]] = {}
    for a in assignments:
        _tombstone(done, a.campaign)
        if a.answer_xml:
            a.answer_xml = ""
            done.answers_cleared += 1
            s.add(a)
        if (a.campaign, a.stage) not in kinds:
            row = s.get(CampaignRow, a.campaign)
            stages = {st["name"]: st["kind"] for st in json.loads(row.spec_json).get("stages", [])} if row else {}
            kind = stages.get(a.stage)
            kinds[(a.campaign, a.stage)] = tasks.get(kind).free_text_extra if kind in tasks.names() else ()
        free = kinds[(a.campaign, a.stage)]
        if not free:
            continue
        for j in s.exec(select(JudgmentRow).where(JudgmentRow.assignment_id == a.assignment_id)).all():
            extra = json.loads(j.extra) if j.extra else {}
            if any(k in extra for k in free):
                rest = {k: v for k, v in extra.items() if k not in free}
                j.extra = json.dumps(rest, sort_keys=True) if rest else None
                s.add(j)
    s.flush()


def _text(column: Column[Any]) -> bool:
    """A text column (SQLModel's str fields are AutoString, a TypeDecorator over String)."""
    impl = getattr(column.type, "impl", column.type)
    return isinstance(impl, String) or isinstance(impl, type) and issubclass(impl, String)


def _rewrite(s: Session, table: Table, ids: set[str], pattern: re.Pattern[str], campaign: str | None,
             done: Forgotten) -> None:
    """Every text cell of `table` that holds one of `ids` (as a whole word), rewritten with the tombstone
    of the row's campaign. The campaign's own name is never rewritten: it is no person's, and every row
    of the campaign is keyed by it."""
    owner = table.c.get("campaign") if "campaign" in table.c else table.c.get("name")
    pk = list(table.primary_key.columns)
    for column in table.c:
        if not _text(column) or column.name in MONEY_COLUMNS or owner is None or column is owner:
            continue
        cond = [column.like(_like(i), escape="\\") for i in ids]
        q = core_select(*pk, owner, column).where(or_(*cond))
        if campaign is not None:
            q = q.where(owner == campaign)
        for row in s.connection().execute(q).all():
            *keys, camp, value = row
            new = pattern.sub(_tombstone(done, camp), value)
            if new == value:
                continue  # the id only inside a longer word: not this person
            s.connection().execute(update(table).where(*(c == k for c, k in zip(pk, keys))).values({column.name: new}))
            done.cells[table.name] = done.cells.get(table.name, 0) + 1


def files_holding(state: Path, ids: set[str], limit: int = 50 << 20) -> list[Path]:
    """Files under the state folder (other than the store) that hold one of `ids`: exports and reports
    written before, and the built-in marketplace's own database."""
    if not state.is_dir():
        return []
    needles = [i.encode("utf-8") for i in ids]
    out = []
    for p in sorted(state.rglob("*")):
        if not p.is_file() or p.name.startswith("campaign.db") or p.stat().st_size > limit:
            continue
        try:
            data = p.read_bytes()
        except OSError:
            continue
        if any(n in data for n in needles):
            out.append(p)
    return out
