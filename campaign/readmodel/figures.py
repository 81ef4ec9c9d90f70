"""The numbers the dashboard, `status --json` and the progress view show, read from the store only.

Aggregate SQL (counts and sums grouped in the database), so a campaign of tens of thousands of HITs is
summarised without loading its rows; the dashboard never writes.
"""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any

from sqlalchemy import func
from sqlmodel import col, select

from campaign.held import held_counts, held_rows
from campaign.ledger import totals
from campaign.money import fmt
from campaign.pay import read_stage_pay
from campaign.readmodel.definitions import cancel_waiting, excluded_text, trap_pass_rate, weighted_agreement
from campaign.readmodel.retest import retest_figures
from campaign.spec import currency_of
from campaign.state import DONE, AssignmentStatus, CampaignStatus, HitStatus, Keys
from campaign.store import AssignmentRow, CampaignRow, EventRow, HitRow, JudgmentRow, KVRow, Store, WorkerRow

PROLIFIC_USAGE_KEY = "prolific.api_usage"  # campaign.prolific.studies.USAGE_KEY (not imported: the read model stays light)

HIT_OPEN = (HitStatus.POSTED,)
HELD_SHOWN = 20  # held rows listed in a campaign's figures (all of them: `campaign held`)


def campaign_figures(store: Store, name: str, now: float | None = None) -> dict[str, Any]:
    now = time.time() if now is None else now
    with store.session() as s:
        camp = s.get(CampaignRow, name)
        if camp is None:
            raise KeyError(name)
        stage_rows = s.exec(select(HitRow.stage, HitRow.status, func.count()).where(HitRow.campaign == name)
                            .group_by(HitRow.stage, HitRow.status)).all()
        slots = s.exec(select(func.coalesce(func.sum(HitRow.assignments), 0)).where(
            HitRow.campaign == name, col(HitRow.status).notin_((HitStatus.FAILED, HitStatus.CANCELLED)))).one()
        hit_counts: dict[str, int] = {}
        for _stage, status, n in stage_rows:
            hit_counts[status] = hit_counts.get(status, 0) + n
        a_counts: dict[str, int] = {}
        invalid = 0
        for status, valid, n in s.exec(select(AssignmentRow.status, AssignmentRow.valid, func.count())
                                       .where(AssignmentRow.campaign == name).group_by(col(AssignmentRow.status), col(AssignmentRow.valid))).all():
            a_counts[status] = a_counts.get(status, 0) + n
            invalid += 0 if valid else n
        t = totals(s, name, Decimal(camp.budget))
        w_total = s.exec(select(func.count()).select_from(WorkerRow).where(WorkerRow.campaign == name)).one()
        w_excluded = s.exec(select(func.count()).select_from(WorkerRow).where(WorkerRow.campaign == name, WorkerRow.excluded == True)).one()  # noqa: E712
        w_blocked = s.exec(select(func.count()).select_from(WorkerRow).where(WorkerRow.campaign == name, WorkerRow.blocked == True)).one()  # noqa: E712
        by_excluded = dict(s.exec(select(JudgmentRow.excluded, func.count()).where(JudgmentRow.campaign == name)
                                  .group_by(col(JudgmentRow.excluded))).all())
        labels, labels_excluded = sum(by_excluded.values()), by_excluded.get(True, 0)
        recent = s.exec(select(func.count()).select_from(AssignmentRow).where(
            AssignmentRow.campaign == name, AssignmentRow.collected_at >= now - 600)).one()
        events = s.exec(select(EventRow).where(EventRow.campaign == name).order_by(col(EventRow.id).desc()).limit(8)).all()
        # a Prolific pilot's summary (`campaign.steps.pilot`), shown until the campaign ends
        pilot = s.exec(select(EventRow.message).where(EventRow.campaign == name, EventRow.kind == "pilot")
                       .order_by(col(EventRow.id).desc())).first()
        worst = s.exec(select(WorkerRow).where(WorkerRow.campaign == name, WorkerRow.reason != None)  # noqa: E711
                       .order_by(col(WorkerRow.excluded).desc(), col(WorkerRow.blocked).desc(), col(WorkerRow.worker_id)).limit(5)).all()
        evidence = [json.loads(e) for e in s.exec(select(WorkerRow.evidence).where(
            WorkerRow.campaign == name, WorkerRow.evidence != None)).all() if e]  # noqa: E711
        held = held_counts(s, name)
        pay = read_stage_pay(s, name)
        costs = s.exec(select(KVRow.key, KVRow.value).where(KVRow.campaign == name,
                                                            col(KVRow.key).startswith(Keys.STUDY_COST))).all()
        usage = s.exec(select(KVRow.value).where(KVRow.campaign == name, KVRow.key == PROLIFIC_USAGE_KEY)).first()
    traps = trap_pass_rate(evidence)
    agreement = weighted_agreement(evidence)
    posted = sum(v for k, v in hit_counts.items() if k in (HitStatus.POSTED, HitStatus.CLOSED))
    submitted = sum(a_counts.values())
    stages: dict[str, dict[str, int]] = {}
    for stage, status, n in stage_rows:
        stages.setdefault(stage, {})[status] = n
    approved, rejected = a_counts.get(AssignmentStatus.APPROVED, 0), a_counts.get(AssignmentStatus.REJECTED, 0)
    retest = retest_figures(store, name, camp.spec_json)  # test-retest per stage with `repeat:` (steps.repeat)
    done_fraction = (submitted / slots) if slots else 0.0
    charged_each = (t.spent / approved) if approved else Decimal("0")
    return {
        "name": name,
        "status": camp.status,
        # while cancelling: what the cancel still waits for (None otherwise)
        "waiting_for": (cancel_waiting(hit_counts.get(HitStatus.POSTED, 0), submitted - approved - rejected)
                        if camp.status == CampaignStatus.CANCELLING else None),
        # per stage: the median accept-to-submit time of approved work and the reward per hour at it (campaign.pay)
        "stages": [{"name": k, "hits": v, **({"repeat": retest[k]} if k in retest else {}),
                    "median_work_seconds": pay.get(k, {}).get("median_work_seconds"),
                    "hourly_pay": None if pay.get(k, {}).get("hourly_pay") is None else fmt(pay[k]["hourly_pay"])}
                   for k, v in sorted(stages.items())],
        "hits": {"planned": sum(hit_counts.values()), "posted": posted, "assignable": hit_counts.get(HitStatus.POSTED, 0),
                 "completed": hit_counts.get(HitStatus.CLOSED, 0), "failed": hit_counts.get(HitStatus.FAILED, 0),
                 "draft": hit_counts.get(HitStatus.DRAFT, 0) + hit_counts.get(HitStatus.POSTING, 0)},
        "assignments": {"expected": int(slots), "submitted": submitted, "approved": approved, "rejected": rejected,
                        "pending_review": submitted - approved - rejected, "invalid": int(invalid)},
        "progress": {"fraction": round(min(done_fraction, 1.0), 4), "recent_per_minute": round(recent / 10.0, 2),
                     "eta_seconds": (round((int(slots) - submitted) / (recent / 600.0)) if recent and int(slots) > submitted else None)},
        "currency": currency_of(json.loads(camp.spec_json or "{}")),  # what "money" is in (its values stay decimal strings)
        "money": {"spent": fmt(t.spent), "reserved": fmt(t.reserved), "fees": fmt(t.fees), "budget": fmt(t.budget),
                  "remaining": fmt(t.remaining),
                  "projected": fmt(t.spent + t.reserved if camp.status in DONE  # nothing more to come
                                   else t.spent + charged_each * max(int(slots) - approved - rejected, 0))},
        "quality": {"agreement": None if agreement is None else round(agreement, 4),
                    "trap_pass_rate": None if traps is None else round(traps, 4),
                    "workers": int(w_total), "workers_excluded": int(w_excluded), "workers_blocked": int(w_blocked),
                    "labels": int(labels), "labels_excluded": int(labels_excluded),
                    "labels_excluded_text": excluded_text(int(labels), int(labels_excluded)),
                    "worst_workers": [{"worker": w.worker_id, "reason": w.reason, "excluded": w.excluded, "blocked": w.blocked}
                                      for w in worst]},
        "events": [{"ts": e.ts, "level": e.level, "kind": e.kind, "message": e.message} for e in events],
        # each finished study's ledger figure against what the service charged (steps.studies.reconcile_costs)
        "reconciliation": [{**json.loads(v), "key": str(k)[len(Keys.STUDY_COST):]} for k, v in sorted(costs)],
        "pilot": pilot,
        # rows a step failed on, quarantined for the operator (`campaign held`, `campaign decide`)
        "held": {**held, "rows": held_rows(store, name, limit=HELD_SHOWN) if held["open"] else []},
        # a Prolific campaign's API calls, submissions, calls per submission and whether webhooks were on (else None)
        "prolific": json.loads(usage) if usage else None,
    }


def collect_figures(store: Store) -> dict[str, Any]:
    with store.session() as s:
        names = [r for r in s.exec(select(CampaignRow.name).order_by(CampaignRow.name)).all()]
    return {"campaigns": [campaign_figures(store, n) for n in names]}
