"""What the full-screen dashboard shows, read from the store only (never the marketplace).

A few grouped SQL queries per campaign (counts and sums in the database), so a redraw at 20,000 HITs
stays well under 200 ms; the only per-row work is over workers (hundreds) and the newest events. The
`Reader` keeps small caches between redraws (the ranking model, recomputed only when more rankings
were reviewed) but never writes.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.engine import Result
from sqlmodel import Session, col

from campaign.held import held_counts
from campaign.ledger import totals
from campaign.readmodel import heartbeat
from campaign.readmodel.alerts import Alert, AlertInput, compute_alerts
from campaign.readmodel.definitions import HOUR, last_hour, trap_pass_rate_of, weighted_agreement_of
from campaign.readmodel.evidence_columns import TOP, EvidenceColumns, StageFigures
from campaign.readmodel.series import (
    Buckets,
    ClockFix,
    Liveness,
    liveness,
    projection,
    recent_rate,
    weighted_series_np,
)
from campaign.spec import currency_of
from campaign.state import ACTIVE, DONE, AssignmentStatus, CampaignStatus, HeldStatus, HitStatus, Keys, LedgerKind
from campaign.store import AssignmentRow, CampaignRow, EventRow, HitRow, JudgmentRow, KVRow, LedgerRow, Store, WorkerRow

N_BUCKETS = 48
PENDING = (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVING, AssignmentStatus.REJECTING)
REVIEWED = (AssignmentStatus.APPROVED, AssignmentStatus.REJECTED)
USER_EVENT_KINDS = ("pause", "resume", "cancel", "extend", "budget", "decide")  # written by commands, not by the daemon
ERROR_KINDS = ("marketplace_error", "throttled", "review_error", "post_failed", "cancel_error", "extend_error",
               "block_error", "bonus_error", "step_error", HeldStatus.HELD, "row_error")


@dataclass
class StageView:
    name: str
    hits_planned: int = 0
    hits_posted: int = 0  # posted or closed
    hits_closed: int = 0
    slots: int = 0  # assignments the posted/planned HITs ask for
    collected: int = 0
    reviewed: int = 0
    pending: int = 0
    auto_approval_delay: float = 0.0
    earliest_auto_approval: float | None = None  # campaign clock: when the oldest unreviewed answer is approved anyway
    batch: int | None = None  # for stages planned in adaptive batches
    pairs: int | None = None
    keep: int | None = None
    precision: float | None = None
    agreement: list[float | None] = field(default_factory=list)
    trap_pass: list[float | None] = field(default_factory=list)
    excluded_share: list[float | None] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)
    agreement_now: float | None = None  # the stage's `r` as `campaign status` defines it (definitions.weighted_agreement)
    trap_pass_now: float | None = None  # and its trap pass rate (definitions.trap_pass_rate)
    labels: int = 0
    labels_excluded: int = 0


@dataclass
class CampaignView:
    name: str
    status: str
    budget: Decimal
    spent: Decimal
    reserved: Decimal
    fees: Decimal
    projected_cost: Decimal
    answers_per_hour: float  # answers collected in the last hour of the campaign's clock (definitions.last_hour)
    spend_per_hour: Decimal
    finish_at: float | None  # campaign clock
    clock_now: float
    clock_speed: float
    bucket_seconds: float
    stages: list[StageView]
    workers: int
    workers_active: set[str]
    workers_excluded: int
    workers_blocked: int
    labels: int
    labels_excluded: int
    agreement: float | None
    trap_pass_rate: float | None
    exclusions: list[tuple[float, str, str, str]]  # wall ts, kind, worker, reason
    events: list[dict[str, Any]]
    live: Liveness
    acknowledged: dict[str, Any] | None  # the heartbeat's status, when the daemon writes one
    alerts: list[Alert]
    currency: str = "USD"  # what its amounts are in (Prolific campaigns may pay in GBP)
    held: int = 0  # rows a step failed on, held for the operator (`campaign held`)
    cost_mismatches: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (study key, figures): ledger != service

    @property
    def committed(self) -> Decimal:
        return self.spent + self.reserved


@dataclass
class Snapshot:
    taken_at: float
    campaigns: list[CampaignView]
    store_url: str

    def money_by_currency(self) -> dict[str, tuple[Decimal, Decimal, Decimal]]:
        """(spent, reserved, budget) added up per currency: pounds and dollars are never summed."""
        out: dict[str, tuple[Decimal, Decimal, Decimal]] = {}
        for c in self.campaigns:
            s, r, b = out.get(c.currency, (Decimal("0.00"), Decimal("0.00"), Decimal("0.00")))
            out[c.currency] = (s + c.spent, r + c.reserved, b + c.budget)
        return out

    @property
    def spent(self) -> Decimal:
        return sum((c.spent for c in self.campaigns), Decimal("0.00"))

    @property
    def reserved(self) -> Decimal:
        return sum((c.reserved for c in self.campaigns), Decimal("0.00"))

    @property
    def budget(self) -> Decimal:
        return sum((c.budget for c in self.campaigns), Decimal("0.00"))

    @property
    def answers_per_hour(self) -> float:
        return sum(c.answers_per_hour for c in self.campaigns)

    @property
    def workers_active(self) -> int:
        active: set[str] = set()
        for c in self.campaigns:
            active |= c.workers_active
        return len(active)


class Reader:
    """Reads snapshots of every campaign in a store; `state_dir` (when known) adds the saved clock."""

    def __init__(self, store: Store, state_dir: Path | None = None) -> None:
        self.store = store
        self.state_dir = state_dir
        self._precision: dict[tuple[str, str, int], float | None] = {}
        self._arrivals: dict[str, Arrivals] = {}
        self._evidence: dict[str, EvidenceColumns] = {}  # campaign -> its workers' evidence figures
        self._label_count: dict[str, tuple[int, int]] = {}  # campaign -> (highest judgment id counted, labels)

    def _stage_labels(self, name: str) -> dict[str, tuple[int, int]]:
        """(labels, labels excluded) per stage, counted in the database."""
        with self.store.session() as s:
            rows = _rows(s, select(col(JudgmentRow.stage), col(JudgmentRow.excluded), func.count())
                         .where(col(JudgmentRow.campaign) == name).group_by(col(JudgmentRow.stage), col(JudgmentRow.excluded)))
        out: dict[str, tuple[int, int]] = {}
        for st, excluded, n in rows:
            total, x = out.get(st, (0, 0))
            out[st] = (total + int(n), x + (int(n) if excluded else 0))
        return out

    def _labels(self, s: Session, name: str) -> tuple[int, int]:
        """(labels, labels excluded): judgments are only ever added, so the total is counted on from the
        highest id already counted; the excluded ones (a few percent, flags change) are counted afresh."""
        last_id, total = self._label_count.get(name, (0, 0))
        n, top = _rows(s, select(func.count(), func.max(col(JudgmentRow.id)))
                       .where(col(JudgmentRow.campaign) == name, col(JudgmentRow.id) > last_id))[0]
        if n:
            last_id, total = int(top), total + int(n)
            self._label_count[name] = (last_id, total)
        excluded = _q(s, select(func.count()).select_from(JudgmentRow).where(
            col(JudgmentRow.campaign) == name, col(JudgmentRow.excluded) == True)).scalar()  # noqa: E712
        return total, int(excluded or 0)

    def names(self) -> list[str]:
        with self.store.session() as s:
            return list(_q(s, select(col(CampaignRow.name)).order_by(col(CampaignRow.name))).scalars().all())

    def snapshot(self, now: float | None = None) -> Snapshot:
        now = time.time() if now is None else now
        return Snapshot(taken_at=now, campaigns=[self.campaign(n, now) for n in self.names()], store_url=self.store.url)

    def alerts(self, name: str, now: float) -> list[Alert]:
        """The campaign's standing alerts: `campaign(name, now).alerts` without the figures no alert
        reads (label counts, the exclusions, held rows). A Reader kept from one call to the next reads
        only what is new of the campaign's answers (`Arrivals`), as the daemon's `alerts` step does."""
        return self.campaign(name, now, full=False).alerts

    # --- one campaign -----------------------------------------------------------------------------------
    def campaign(self, name: str, now: float, full: bool = True) -> CampaignView:
        """Everything the dashboard shows of one campaign; `full=False` leaves out what no alert reads
        (labels and labels excluded stay 0, `exclusions` empty, `held` 0, each stage's trap and
        exclusion series and its `agreement_now` / `trap_pass_now` empty)."""
        with self.store.session() as s:
            camp = s.get(CampaignRow, name)
            if camp is None:
                raise KeyError(name)
            spec = json.loads(camp.spec_json or "{}")
            kv = {k: v for k, v in _rows(s, select(col(KVRow.key), col(KVRow.value)).where(
                col(KVRow.campaign) == name, (col(KVRow.key) == Keys.HEARTBEAT) | col(KVRow.key).startswith(Keys.BATCH_STATE)
                | col(KVRow.key).startswith(Keys.STUDY_COST)))}
            t = totals(s, name, Decimal(camp.budget))
            last_event = _q(s, select(func.max(col(EventRow.ts))).where(col(EventRow.campaign) == name,
                                                                    col(EventRow.kind).notin_(USER_EVENT_KINDS))).scalar()
            recent_ledger = _rows(s, select(col(LedgerRow.kind), col(LedgerRow.created_at), col(LedgerRow.assignment_id))
                                  .where(col(LedgerRow.campaign) == name).order_by(col(LedgerRow.id).desc()).limit(200))
            last_ledger = recent_ledger[0][1] if recent_ledger else None
            fix_row = None
            charge = next((r for r in recent_ledger if r[0] == LedgerKind.CHARGE and r[2]), None)
            if charge is not None:
                decided = _q(s, select(col(AssignmentRow.decided_at)).where(col(AssignmentRow.assignment_id) == charge[2])).scalar()
                fix_row = (charge[1], decided)
        beat = heartbeat.parse(kv.get(Keys.HEARTBEAT))
        spec_stages = {str(st.get("name")): st for st in spec.get("stages", []) if isinstance(st, dict)}
        poll = float(spec.get("poll_interval") or 1.0)
        clock_file = self._clock_file()
        # the heartbeat, when the daemon writes one, is the only sign needed; otherwise its newest write
        signs = [beat["wall"]] if beat else [last_event, last_ledger, clock_file[0] if clock_file else None]
        live = liveness(now, signs, threshold=max(10.0, 20 * poll), finished=camp.status in DONE)
        fix = self._clock_fix(spec, beat, clock_file, fix_row)
        clock_now = fix.at(now, running=live.live) if fix else now
        if live.last_seen is not None and fix is not None and not live.live:
            clock_now = fix.at(live.last_seen, running=True)  # the clock stopped with the daemon
        view = self._work(name, camp.status, spec_stages, kv, t, clock_now, fix.speed if fix else 1.0, full)
        view.currency = currency_of(spec)
        view.cost_mismatches = cost_mismatches(kv)
        view.live = live
        view.acknowledged = beat
        view.events = self._events(name)
        if full:
            view.exclusions = self._exclusions(name)
            with self.store.session() as s:
                view.held = held_counts(s, name)["open"]
        view.alerts = compute_alerts(alert_input(view, now))
        return view

    def _clock_file(self) -> tuple[float, float, float] | None:
        """(wall mtime, clock now, speed) from the clock file the daemon saves after each tick."""
        if self.state_dir is None:
            return None
        f = self.state_dir / "market" / "clock.json"
        try:
            data = json.loads(f.read_text())
            return f.stat().st_mtime, float(data["now"]), float(data["speed"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @staticmethod
    def _clock_fix(spec: dict[str, Any], beat: dict[str, Any] | None, clock_file: tuple[float, float, float] | None,
                   fix_row: Any) -> ClockFix | None:
        """The best-known wall/clock pair: the heartbeat, else the saved clock file, else the newest charge
        (booked at wall time for an assignment decided at clock time) with the speed the spec asks for."""
        if beat is not None:
            return ClockFix(wall=float(beat["wall"]), clock=float(beat["clock"]), speed=float(beat.get("speed", 1.0)))
        if clock_file is not None:
            return ClockFix(wall=clock_file[0], clock=clock_file[1], speed=clock_file[2])
        if fix_row is not None and fix_row[1] is not None:
            crowd = spec.get("crowd") or {}
            simulated = crowd.get("kind") == "simulated" and spec.get("marketplace") == "local" and not spec.get("endpoint_url")
            return ClockFix(wall=float(fix_row[0]), clock=float(fix_row[1]), speed=float(crowd.get("speed", 1.0)) if simulated else 1.0)
        return None

    def _work(self, name: str, status: str, spec_stages: dict[str, dict[str, Any]], kv: dict[str, str], t: Any,
              clock_now: float, speed: float, full: bool = True) -> CampaignView:
        stages: dict[str, StageView] = {}

        def stage(n: str) -> StageView:
            if n not in stages:
                sp = spec_stages.get(n, {})
                stages[n] = StageView(name=n, auto_approval_delay=float(sp.get("auto_approval_delay") or 0))
            return stages[n]

        for n in spec_stages:
            stage(n)
        with self.store.session() as s:
            for st, hstatus, count, slots, batch in _rows(s, select(
                    col(HitRow.stage), col(HitRow.status), func.count(), func.coalesce(func.sum(col(HitRow.assignments)), 0),
                    func.max(col(HitRow.batch))).where(col(HitRow.campaign) == name).group_by(col(HitRow.stage), col(HitRow.status))):
                v = stage(st)
                v.hits_planned += count
                if hstatus in (HitStatus.POSTED, HitStatus.CLOSED):
                    v.hits_posted += count
                if hstatus == HitStatus.CLOSED:
                    v.hits_closed += count
                if hstatus not in (HitStatus.FAILED, HitStatus.CANCELLED):
                    v.slots += int(slots)
                if Keys.batch_state(st) in kv:
                    v.batch = max(v.batch or 0, int(batch or 0))
            by_status = dict(_rows(s, select(col(AssignmentRow.status), func.count())
                                   .where(col(AssignmentRow.campaign) == name).group_by(col(AssignmentRow.status))))
            arrivals = self._arrivals.setdefault(name, Arrivals())
            arrivals.update(s, name, margin=max(1.0, 2 * speed), expected=sum(by_status.values()))
            pending_total = sum(n for st_, n in by_status.items() if st_ in PENDING)
            if len(arrivals.stage_names) > 1 and pending_total:
                pending = dict(_rows(s, select(col(AssignmentRow.stage), func.count()).where(
                    col(AssignmentRow.campaign) == name, col(AssignmentRow.status).in_(PENDING)).group_by(col(AssignmentRow.stage))))
            else:
                pending = {st_: pending_total for st_ in arrivals.stage_names}
            for st, count in pending.items():
                v = stage(st)
                v.pending = count
                if count and v.auto_approval_delay:
                    # the oldest unreviewed answers, found along the collection-time index (answers are
                    # collected in about the order they were submitted): the earliest auto-approval
                    oldest = _q(s, select(col(AssignmentRow.submit_time)).where(
                        col(AssignmentRow.campaign) == name, col(AssignmentRow.stage) == st, col(AssignmentRow.status).in_(PENDING))
                        .order_by(col(AssignmentRow.collected_at)).limit(50)).scalars().all()
                    known = [float(x) for x in oldest if x is not None]
                    if known:
                        v.earliest_auto_approval = min(known) + v.auto_approval_delay
            n_labels, n_excluded = self._labels(s, name) if full else (0, 0)
            workers = _rows(s, select(col(WorkerRow.worker_id), col(WorkerRow.excluded), col(WorkerRow.blocked), col(WorkerRow.evidence))
                             .where(col(WorkerRow.campaign) == name))
        rows = [arrivals.index(w) for w, _, _, _ in workers]
        table = self._evidence.setdefault(name, EvidenceColumns())
        table.update(zip(rows, (e for _, _, _, e in workers)))
        current = np.zeros(len(arrivals.worker_names), dtype=bool)
        current[rows] = True
        marked = np.zeros(len(current), dtype=bool)  # the workers' rows' own exclusion flag
        marked[[r for r, (_, x, _, _) in zip(rows, workers) if x]] = True
        t_arr, s_arr, w_arr = arrivals.arrays()
        if len(t_arr) and status in DONE:
            end = float(t_arr.max())
        else:
            end = clock_now
        start = float(t_arr.min()) if len(t_arr) else end - 3600
        buckets = Buckets(start=start, end=max(end, start + 60), n=N_BUCKETS)
        b_arr = np.clip(((t_arr - buckets.start) / buckets.width).astype(np.int64), 0, N_BUCKETS - 1) if len(t_arr) else t_arr.astype(np.int64)
        total_answers = [int(x) for x in np.bincount(b_arr, minlength=N_BUCKETS)]
        hour = (t_arr >= clock_now - HOUR) & (t_arr <= clock_now)
        answers_last_hour, active = last_hour(t_arr[hour].tolist(), [arrivals.worker_names[i] for i in w_arr[hour]], clock_now)
        primary = next(iter(spec_stages), None)
        for si, st in enumerate(arrivals.stage_names):
            v = stage(st)
            mask = s_arr == si
            v.collected = int(mask.sum())
            v.reviewed = v.collected - v.pending
            fig = table.stage(st, primary=st == (primary or st), current=current)
            w_sel, b_sel = w_arr[mask], b_arr[mask]
            v.agreement = weighted_series_np(w_sel, b_sel, fig.correlation, N_BUCKETS)
            v.answers = [int(x) for x in np.bincount(b_sel, minlength=N_BUCKETS)]
            if not full:  # no alert reads the rest
                continue
            v.trap_pass = weighted_series_np(w_sel, b_sel, _trap_share(fig), N_BUCKETS)
            v.excluded_share = weighted_series_np(w_sel, b_sel, _excluded(fig, marked, current), N_BUCKETS)
            v.agreement_now = weighted_agreement_of(fig.correlation, fig.labels)
            v.trap_pass_now = trap_pass_rate_of(fig.traps_seen, fig.traps_passed)
        for stage_name, (n_stage, x_stage) in (self._stage_labels(name) if full else {}).items():
            stage(stage_name).labels, stage(stage_name).labels_excluded = n_stage, x_stage
        for st, v in stages.items():
            raw = kv.get(Keys.batch_state(st))
            if raw is not None:
                from campaign.tasks.ranking import batch_state

                v.pairs = len(batch_state(json.loads(raw)).get("pairs") or [])
                keep = spec_stages.get(st, {}).get("keep")
                v.keep = int(keep) if keep is not None else None
                if v.batch is None:
                    v.batch = 0
                v.precision = self._ranking_precision(name, st, v.keep, v.reviewed)
        top = table.stage(TOP, primary=True, current=current)
        rate = recent_rate(total_answers, buckets.width, last=max(2, N_BUCKETS // 8)) if status in ACTIVE else 0.0
        slots = sum(v.slots for v in stages.values())
        collected = sum(v.collected for v in stages.values())
        approved_like = sum(v.reviewed for v in stages.values())
        charged_each = t.spent / approved_like if approved_like else Decimal("0")
        # cost per decided answer so far, times the answers still to come; before the first decision,
        # the reserved worst case (reward and fee of every assignment posted)
        projected = t.spent + charged_each * max(slots - approved_like, 0) if approved_like else t.spent + t.reserved
        if status in DONE:  # no answer is still to come: slots never answered cost nothing
            projected = t.spent + t.reserved
        return CampaignView(
            name=name, status=status, budget=t.budget, spent=t.spent, reserved=t.reserved, fees=t.fees,
            projected_cost=projected.quantize(Decimal("0.01")), answers_per_hour=float(answers_last_hour),
            spend_per_hour=(charged_each * answers_last_hour).quantize(Decimal("0.01")),
            finish_at=projection(slots - collected, rate, clock_now) if status in (CampaignStatus.RUNNING, CampaignStatus.PAUSED) else None,
            clock_now=clock_now, clock_speed=speed, bucket_seconds=buckets.width, stages=list(stages.values()),
            workers=len(workers), workers_active=active, workers_excluded=int(marked.sum()),
            workers_blocked=sum(1 for w in workers if w[2]), labels=n_labels, labels_excluded=n_excluded,
            agreement=weighted_agreement_of(top.correlation, top.labels),
            trap_pass_rate=trap_pass_rate_of(top.traps_seen, top.traps_passed),
            exclusions=[], events=[], live=Liveness(False, None, ""), acknowledged=None, alerts=[],
        )

    def _events(self, name: str, limit: int = 200) -> list[dict[str, Any]]:
        with self.store.session() as s:
            rows = _rows(s, select(col(EventRow.id), col(EventRow.ts), col(EventRow.level), col(EventRow.kind), col(EventRow.message))
                          .where(col(EventRow.campaign) == name).order_by(col(EventRow.id).desc()).limit(limit))
        return [{"id": i, "ts": ts, "level": lv, "kind": k, "message": m} for i, ts, lv, k, m in rows]

    def _exclusions(self, name: str, limit: int = 6) -> list[tuple[float, str, str, str]]:
        with self.store.session() as s:
            rows = _rows(s, select(col(EventRow.ts), col(EventRow.kind), col(EventRow.subject), col(EventRow.message))
                          .where(col(EventRow.campaign) == name, col(EventRow.kind).in_(("worker_excluded", "worker_blocked")))
                          .order_by(col(EventRow.id).desc()).limit(limit))
        out = []
        for ts, kind, subject, message in rows:
            worker = subject or message.split(":", 1)[0]
            reason = message.split(":", 1)[1].strip() if ":" in message else message
            out.append((ts, kind, worker, reason))
        return out

    def _ranking_precision(self, name: str, stage: str, keep: int | None, reviewed: int) -> float | None:
        """Expected top-`keep` precision of the online model over the stage's reviewed rankings; cached
        until more of them are reviewed (the model is rebuilt from all rankings, as the daemon does)."""
        if keep is None:
            return None
        key = (name, stage, reviewed)
        if key in self._precision:
            return self._precision[key]
        from campaign.plan.pairs import expected_topk_precision
        from campaign.tasks.base import TRAP_PREFIX
        from campaign.tasks.ranking import online_model

        with self.store.session() as s:
            hit_items = _q(s, select(col(HitRow.item_keys)).where(col(HitRow.campaign) == name, col(HitRow.stage) == stage)).scalars().all()
            rows = _rows(s, select(col(JudgmentRow.assignment_id), col(JudgmentRow.item_key), col(JudgmentRow.value))
                          .join(AssignmentRow, col(AssignmentRow.assignment_id) == col(JudgmentRow.assignment_id))
                          .where(col(JudgmentRow.campaign) == name, col(JudgmentRow.stage) == stage, col(JudgmentRow.excluded) == False,  # noqa: E712
                                 col(AssignmentRow.status) == AssignmentStatus.APPROVED))
        items = sorted({k for raw in hit_items for k in json.loads(raw) if not k.startswith(TRAP_PREFIX)})
        by_assignment: dict[str, list[tuple[float, str]]] = {}
        for aid, item, value in rows:
            by_assignment.setdefault(aid, []).append((value, item))
        ranks = [[i for _, i in sorted(v) if not i.startswith(TRAP_PREFIX)] for _, v in sorted(by_assignment.items())]
        precision: float | None = None
        if len(items) > 1:
            model = online_model(items, ranks)
            precision = float(expected_topk_precision(model.means(), model.sigmas(), min(keep, len(items) - 1)))
        self._precision = {k: v for k, v in self._precision.items() if k[:2] != (name, stage)}
        self._precision[key] = precision
        return precision


class Arrivals:
    """Every assignment's stage, worker and collection time (campaign clock), read once and afterwards
    only from a little before the newest one seen (a campaign's answers are stored in the order of their
    times); checked against the store's count each time and read afresh if one is missing.

    Kept from pass to pass (the daemon's `alerts` step, the dashboard), it holds 14 bytes per answer
    (time, stage and worker in typed columns grown a quarter at a time, so at most 17.5) and the ids of
    the answers read within the margin before the newest one only: those are the ones the next read
    returns again. `arrays()` gives views of the columns, not copies: a daemon holds a Reader for each of
    its campaigns for the whole run, and the copies it kept beside the columns (24 bytes an answer) were
    47 MiB of each 470,000 daemon by the end."""

    GROWTH = 1.25  # a column full: room for a quarter more

    def __init__(self) -> None:
        self.count = 0
        self.stage_names: list[str] = []
        self.worker_names: list[str] = []
        self._stage_index: dict[str, int] = {}
        self._worker_index: dict[str, int] = {}
        self._t = np.zeros(0, dtype=np.float64)
        self._s = np.zeros(0, dtype=np.int16)
        self._w = np.zeros(0, dtype=np.int32)
        self._recent: dict[str, float] = {}  # id -> time of the answers at or after the last read's start
        self.cursor: float | None = None

    def update(self, s: Session, name: str, margin: float, expected: int) -> None:
        self._read(s, name, None if self.cursor is None else self.cursor - margin)
        if self.count < expected:  # one was stored with a time before the cursor: read them all again
            self._reset()
            self._read(s, name, None)
        if self.cursor is not None:  # the next read starts at cursor - margin: only ids from there on can come again
            low = self.cursor - margin
            self._recent = {aid: t for aid, t in self._recent.items() if t >= low}

    def _reset(self) -> None:
        self.count = 0
        self._recent.clear()
        self.cursor = None

    def _read(self, s: Session, name: str, since: float | None) -> None:
        stmt = select(col(AssignmentRow.assignment_id), col(AssignmentRow.stage), col(AssignmentRow.worker_id),
                      col(AssignmentRow.collected_at)).where(col(AssignmentRow.campaign) == name)
        if since is not None:
            stmt = stmt.where(col(AssignmentRow.collected_at) >= since)
        times: list[float] = []
        stages: list[int] = []
        workers: list[int] = []
        for aid, stage, worker, t in _rows(s, stmt):
            if aid in self._recent:
                continue
            t = float(t)
            self._recent[aid] = t
            if stage not in self._stage_index:
                self._stage_index[stage] = len(self.stage_names)
                self.stage_names.append(stage)
            times.append(t)
            stages.append(self._stage_index[stage])
            workers.append(self.index(worker))
            self.cursor = t if self.cursor is None else max(self.cursor, t)
        self._append(times, stages, workers)

    def index(self, worker: str) -> int:
        """The worker's index in `worker_names` (the rows of the campaign's `EvidenceColumns` too), given
        on first sight: a worker with a row but no answer read yet gets one as well."""
        got = self._worker_index.get(worker)
        if got is None:
            worker = sys.intern(worker)  # the same workers work in many of a daemon's campaigns: one copy of the id
            got = self._worker_index[worker] = len(self.worker_names)
            self.worker_names.append(worker)
        return got

    def _append(self, times: list[float], stages: list[int], workers: list[int]) -> None:
        n, k = self.count, len(times)
        if not k:
            return
        if n + k > len(self._t):  # new columns; views handed out earlier keep the old ones alive
            room = max(n + k, int(len(self._t) * self.GROWTH) + 1024)
            self._t, self._s, self._w = (np.concatenate([old[:n], np.zeros(room - n, dtype=old.dtype)])
                                         for old in (self._t, self._s, self._w))
        self._t[n:n + k] = times
        self._s[n:n + k] = stages
        self._w[n:n + k] = workers
        self.count = n + k

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(times, stage indexes, worker indexes) of every answer read: read-only views, valid until the
        next `update` (which writes past their end, or over them when it reads every answer again)."""
        out = (self._t[:self.count], self._s[:self.count], self._w[:self.count])
        for a in out:
            a.flags.writeable = False
        return out


def _trap_share(fig: StageFigures) -> np.ndarray:
    """Traps passed over seen per worker, NaN where none was seen."""
    seen = fig.traps_seen.astype(np.float64)
    return np.divide(fig.traps_passed, seen, out=np.full(len(seen), np.nan), where=fig.has & (seen > 0))


def _excluded(fig: StageFigures, marked: np.ndarray, current: np.ndarray) -> np.ndarray:
    """1/0 per worker: the stage's evidence's own exclusion flag, else the worker row's for the primary
    stage (whose record is the top level); 0 for a worker without evidence for the stage; NaN for an
    index that is no current worker."""
    flag = np.where(fig.excluded >= 0, fig.excluded == 1, marked)
    out = np.where(fig.has, flag, False).astype(np.float64)
    out[~current] = np.nan
    return out


def _q(s: Session, stmt: Any) -> Result[Any]:
    """Run a Core select on the session's connection: the grouped queries here return plain rows."""
    return s.connection().execute(stmt)


def _rows(s: Session, stmt: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in _q(s, stmt)]


def cost_mismatches(kv: dict[str, str]) -> list[tuple[str, dict[str, str]]]:
    """(study key, figures) of each finished study whose last reconciliation (`steps.studies.reconcile_costs`)
    found the ledger's figure different from what the service charged."""
    out = []
    for key, value in sorted(kv.items()):
        if not key.startswith(Keys.STUDY_COST):
            continue
        try:
            figures = {str(k): str(v) for k, v in json.loads(value).items()}
        except (ValueError, AttributeError):
            continue
        if figures.get("booked") != figures.get("charged"):
            out.append((key[len(Keys.STUDY_COST):], figures))
    return out


def alert_input(view: CampaignView, wall_now: float) -> AlertInput:
    errors = [e["ts"] for e in view.events if e["kind"] in ERROR_KINDS]
    return AlertInput(
        currency=view.currency, campaign=view.name, status=view.status, budget=view.budget, committed=view.committed,
        review_deadlines=[(st.name, st.earliest_auto_approval, st.auto_approval_delay) for st in view.stages
                          if st.earliest_auto_approval is not None],
        clock_now=view.clock_now,
        agreement={st.name: st.agreement for st in view.stages if st.agreement},
        answers={st.name: st.answers for st in view.stages if st.agreement},
        error_times=errors, wall_now=wall_now, clock_speed=view.clock_speed,
        cost_mismatches=view.cost_mismatches,
    )

