"""Prolific as a `Marketplace`: recruitment and pay on Prolific, the work on the campaign's own task site.

The HITs themselves are posted, unpaid, on the in-process built-in marketplace (an MTurk-API
`Marketplace`, `inner`), whose worker site is the task site; Prolific participants reach it through the
door (`campaign.market.prolific_site`). This adapter adds, for each HIT type (one per stage, or per
ranking batch), a Prolific study whose places cover the posted assignments (`places_needed`), raised as
more HITs are posted or places are lost (returned, timed out, rejected), and stopped on request. Single
HITs are decided on the task site as for `local`; once every HIT of a participant's submission is
decided, the bundle's verdict (`bundle_verdict`) is sent to Prolific. Bonuses go to the submission that
did the assignment, through Prolific's bonus batches. Every remote Prolific call goes through
`ProlificStudies`, which journals intent before the call.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

from campaign.market.prolific_site import ProlificDoor
from campaign.marketplaces.base import Capabilities, HitRequest, HitType, Marketplace, RemoteAssignment, RemoteHit
from campaign.prolific.gate import StudySeat
from campaign.prolific.studies import ProlificStudies
from campaign.prolific.study import ProlificConfig, study_body
from campaign.prolific.verdict import bundle_verdict, places_needed

SCHEMA = """
CREATE TABLE IF NOT EXISTS posted (hit_id TEXT PRIMARY KEY, type_id TEXT NOT NULL, assignments INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS hit_types (type_id TEXT PRIMARY KEY, title TEXT NOT NULL, description TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS verdicts (assignment_id TEXT PRIMARY KEY, decision TEXT NOT NULL, reason TEXT NOT NULL);
"""
LOST = ("RETURNED", "TIMED-OUT", "REJECTED")


class ProlificMarketplace:
    def __init__(self, inner: Marketplace, studies: ProlificStudies, door: ProlificDoor, cfg: ProlificConfig,
                 state_dir: Path, *, name: str = "prolific-local") -> None:
        self.inner = inner
        self.studies = studies
        self.door = door
        self.cfg = cfg
        self.name = name
        self.capabilities: Capabilities = inner.capabilities
        state_dir.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(state_dir / "prolific-market.sqlite", check_same_thread=False, isolation_level=None)
        self._db.executescript(SCHEMA)
        self._lock = threading.RLock()

    def close(self) -> None:
        self._db.close()

    # -- posting: HITs on the task site, places on Prolific ------------------------------------------------------
    def create_hit_type(self, hit_type: HitType, *, sandbox: bool) -> str:
        from campaign.spec import Qualifications

        # Paid by Prolific, targeted by the study's filters: on the task site the HITs are free and open to
        # whoever the door admits.
        open_type = replace(hit_type, reward=Decimal("0.00"), qualifications=Qualifications(locales=()))
        type_id = self.inner.create_hit_type(open_type, sandbox=sandbox)
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO hit_types VALUES (?,?,?)", (type_id, hit_type.title, hit_type.description))
        return type_id

    def create_hit(self, type_id: str, request: HitRequest) -> RemoteHit:
        hit = self.inner.create_hit(type_id, request)
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO posted VALUES (?,?,?)", (hit.hit_id, type_id, request.max_assignments))
        self.sync_places(type_id)
        return hit

    def sync_places(self, type_id: str) -> int:
        """Open enough places for the type's posted assignments plus one per place lost so far."""
        with self._lock:
            total = int(self._db.execute("SELECT COALESCE(SUM(assignments), 0) FROM posted WHERE type_id=?",
                                         (type_id,)).fetchone()[0])
            title, description = self._db.execute("SELECT title, description FROM hit_types WHERE type_id=?",
                                                  (type_id,)).fetchone() or ("Annotation", "Annotation task")
        places = places_needed(total, self.cfg.bundle)

        def body(internal_name: str, code: str, n: int) -> dict[str, object]:
            return study_body(self.cfg, name=title, description=description, internal_name=internal_name, places=n,
                              completion_code=code, seat=type_id, project_id=None, block_group_id=self.cfg.block_list)
        study_id = self.studies.ensure_study(type_id, places, body)
        row = self.studies.study(type_id)
        assert row is not None
        self.door.add_seat(StudySeat(study_id, type_id, self.cfg.bundle, row["completion_code"], self.cfg.completion_url),
                           stage=type_id)
        lost = sum(1 for s in self.studies.api.submissions(study_id) if s.get("status") in LOST)
        return self.studies.raise_places(type_id, places + lost)

    def stop(self, type_id: str) -> None:
        self.studies.stop(type_id)

    def find_by_annotation(self, annotation: str) -> RemoteHit | None:
        return self.inner.find_by_annotation(annotation)

    def get_hit(self, hit_id: str) -> RemoteHit:
        return self.inner.get_hit(hit_id)

    def expire_hit(self, hit_id: str, at: float) -> None:
        self.inner.expire_hit(hit_id, at)

    def extend_hit(self, hit_id: str, until: float) -> None:
        self.inner.extend_hit(hit_id, until)

    # -- work ---------------------------------------------------------------------------------------------------
    def submissions(self, hit_id: str) -> list[RemoteAssignment]:
        return self.inner.submissions(hit_id)

    def reviewable_hits(self) -> list[str]:
        return self.inner.reviewable_hits()

    def get_assignment(self, assignment_id: str) -> RemoteAssignment:
        return self.inner.get_assignment(assignment_id)

    def answer_fields(self, answer: str) -> list[tuple[str, str]]:
        return self.inner.answer_fields(answer)

    def approve(self, assignment_id: str, feedback: str | None = None) -> None:
        self.inner.approve(assignment_id, feedback)
        self._decided(assignment_id, "approve", "")

    def approve_many(self, assignment_ids: Sequence[str]) -> None:
        for aid in assignment_ids:
            self.approve(aid)

    def reject(self, assignment_id: str, feedback: str) -> None:
        self.inner.reject(assignment_id, feedback)
        self._decided(assignment_id, "reject", feedback)

    def _decided(self, assignment_id: str, decision: str, reason: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO verdicts VALUES (?,?,?)", (assignment_id, decision, reason))
        found = self.door.submission_of(assignment_id)
        if found is not None:
            self.settle(found[0])

    def settle(self, submission_id: str | None = None) -> dict[str, str]:
        """Send the verdict of every submission whose HITs are all decided (or just `submission_id`); a
        submission not completed on Prolific yet is left for a later call. Returns submission -> status."""
        out: dict[str, str] = {}
        subs = [submission_id] if submission_id else [s for s, _ in self.door.submissions()]
        for sub in subs:
            aids = self.door.assignments_of(sub)
            with self._lock:
                rows = {r[0]: (r[1], r[2]) for r in self._db.execute(
                    f"SELECT assignment_id, decision, reason FROM verdicts WHERE assignment_id IN ({','.join('?' * len(aids))})",
                    aids)} if aids else {}
            verdict = bundle_verdict([rows[a][0] if a in rows else None for a in aids], [rows[a][1] for a in aids if a in rows])
            if verdict.action != "wait":
                out[sub] = self.studies.decide(sub, verdict)
        return out

    # -- money and workers ----------------------------------------------------------------------------------------
    def bonus(self, worker_id: str, assignment_id: str, amount: Decimal, reason: str, token: str) -> None:
        found = self.door.submission_of(assignment_id)
        if found is None:
            raise KeyError(f"assignment {assignment_id} was not done through Prolific")
        self.studies.bonus(token, found[1], found[0], amount)

    def block(self, worker_id: str, reason: str) -> None:
        """Blocked on the task site: the door then has no task for them (a block-list group on Prolific
        itself is `prolific.block_list` in the spec)."""
        self.inner.block(worker_id, reason)

    def balance(self) -> Decimal:
        return self.inner.balance()
