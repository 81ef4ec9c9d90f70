"""Applying the review policy on every pass: evidence from the store, decisions back into the store.

Exclusion is recomputed from all labels each time (a worker can be cleared as evidence grows), so the
final scores always reflect the final evidence. Every change of a worker's standing is an event with
its evidence. Blocks and bonuses are remote actions and get the same intent-call-record care as
approvals: a bonus has a deterministic UniqueRequestToken and a ledger ref, so it is paid once.
"""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal

from botocore.exceptions import BotoCoreError, ClientError
from sqlmodel import func, select

from campaign.ledger import BudgetExceeded, charge_bonus, release_bonus, reserve_bonus
from campaign.money import fmt
from campaign.quality.evidence import Label, TrapResult
from campaign.quality.review import PolicyConfig, ReviewResult, review
from campaign.spec import Stage
from campaign.steps.context import Context, crash_point
from campaign.steps.post import error_code
from campaign.store import AssignmentRow, HitRow, JudgmentRow, WorkerRow
from campaign.tasks.base import TRAP_PREFIX

# Rejected work stays evidence: a spammer whose work was rejected must not look clean afterwards.
COUNTED = ("submitted", "approving", "approved", "rejecting", "rejected")


def policy_stage(ctx: Context) -> Stage | None:
    """The stage quality control reads: the campaign's Likert stage (its labels are numeric ratings)."""
    if not ctx.campaign.quality.enabled:
        return None
    return next((s for s in ctx.campaign.stages if s.kind == "likert"), None)


def evaluate(ctx: Context, stage: Stage) -> ReviewResult:
    with ctx.store.session() as s:
        rows = s.exec(
            select(JudgmentRow.item_key, JudgmentRow.worker_id, JudgmentRow.assignment_id, JudgmentRow.value)
            .join(AssignmentRow, AssignmentRow.assignment_id == JudgmentRow.assignment_id)
            .where(JudgmentRow.campaign == ctx.name, JudgmentRow.stage == stage.name, AssignmentRow.valid == True,  # noqa: E712
                   AssignmentRow.status.in_(COUNTED))
            .order_by(JudgmentRow.assignment_id, JudgmentRow.item_key)
        ).all()
    labels, traps = [], []
    for item, worker, aid, value in rows:
        if item.startswith(TRAP_PREFIX):
            traps.append(TrapResult(worker=worker, assignment=aid, item=item, value=value, passed=value <= stage.traps.max_rating))
        else:
            labels.append(Label(item=item, worker=worker, assignment=aid, value=value))
    return review(labels, traps, PolicyConfig.from_spec(ctx.campaign.quality))


def apply(ctx: Context, stage: Stage, result: ReviewResult, primary: bool = True) -> None:
    """Write one stage's exclusions and each worker's evidence; an event for every change of standing.

    A worker's row keeps the evidence of every policed stage under "stages"; the primary (Likert)
    stage's evidence also sits at the top, where the dashboard reads it. A worker is excluded when any
    stage excludes them, but their labels are left out only in the stage that excluded them.
    """
    excluded = result.excluded
    with ctx.store.session() as s:
        for w in s.exec(select(WorkerRow).where(WorkerRow.campaign == ctx.name)).all():
            e = result.evidence.get(w.worker_id)
            old = json.loads(w.evidence) if w.evidence else {}
            stages = dict(old.get("stages", {}))
            if e is None and stage.name not in stages:
                continue
            stages[stage.name] = {**(e.as_dict() if e else {}), "excluded": w.worker_id in excluded,
                                  "reason": result.reason(w.worker_id)}
            top = (e.as_dict() if e else {}) if primary else {k: v for k, v in old.items() if k != "stages"}
            if "competence" in old and "competence" not in top:
                top["competence"] = old["competence"]
            now_excluded = any(v.get("excluded") for v in stages.values())
            reasons = [f"{name}: {v['reason']}" if len(stages) > 1 else v["reason"]
                       for name, v in sorted(stages.items()) if v.get("excluded") and v.get("reason")]
            reason = "; ".join(reasons) or result.reason(w.worker_id)
            evidence = json.dumps({**top, "stages": stages}, sort_keys=True)
            if now_excluded != w.excluded:
                ctx.store.event(ctx.name, "worker_excluded" if now_excluded else "worker_included",
                                f"{w.worker_id}: {reason or 'evidence improved'}", subject=w.worker_id,
                                data=stages, session=s)
            if (w.excluded, w.reason, w.evidence) != (now_excluded, reason, evidence):
                w.excluded, w.reason, w.evidence = now_excluded, reason, evidence
                s.add(w)
        for j in s.exec(select(JudgmentRow).where(JudgmentRow.campaign == ctx.name, JudgmentRow.stage == stage.name)).all():
            want = j.worker_id in excluded
            if j.excluded != want:
                j.excluded = want
                s.add(j)


def evaluate_ranking(ctx: Context, stage: Stage) -> ReviewResult:
    """The ranking analogue: a worker's order of a HIT's items against the mean position the other
    workers gave the same items in the same HIT (labels keyed by HIT and item), and trap items that
    must be placed last or within `tolerance` of last."""
    with ctx.store.session() as s:
        rows = s.exec(
            select(JudgmentRow.item_key, JudgmentRow.worker_id, JudgmentRow.assignment_id, JudgmentRow.value, AssignmentRow.hit_key)
            .join(AssignmentRow, AssignmentRow.assignment_id == JudgmentRow.assignment_id)
            .where(JudgmentRow.campaign == ctx.name, JudgmentRow.stage == stage.name, AssignmentRow.valid == True,  # noqa: E712
                   AssignmentRow.status.in_(COUNTED))
            .order_by(JudgmentRow.assignment_id, JudgmentRow.item_key)
        ).all()
    shown: dict[str, int] = {}
    for _, _, aid, _, _ in rows:
        shown[aid] = shown.get(aid, 0) + 1
    labels, traps = [], []
    for item, worker, aid, position, hit_key in rows:
        if item.startswith(TRAP_PREFIX):
            traps.append(TrapResult(worker=worker, assignment=aid, item=item, value=position,
                                    passed=position >= shown[aid] - stage.traps.tolerance))
        else:
            labels.append(Label(item=f"{hit_key}|{item}", worker=worker, assignment=aid, value=-position))
    return review(labels, traps, PolicyConfig.from_spec(ctx.campaign.quality))


def _review_when_new(ctx: Context, stage: Stage, evaluate_stage, primary: bool) -> ReviewResult:
    """Run a stage's policy again only when its counted answers changed since the last pass (cached on
    the context by stage name), writing exclusions and evidence each time it runs."""
    with ctx.store.session() as s:
        n = s.exec(select(func.count()).select_from(AssignmentRow).where(
            AssignmentRow.campaign == ctx.name, AssignmentRow.stage == stage.name, AssignmentRow.status.in_(COUNTED))).one()
    cache = ctx.__dict__.setdefault("_reviews", {})
    if stage.name in cache and cache[stage.name][0] == n:
        return cache[stage.name][1]
    result = evaluate_stage(ctx, stage)
    apply(ctx, stage, result, primary=primary)
    cache[stage.name] = (n, result)
    return result


def ranking_quality_pass(ctx: Context) -> dict[str, ReviewResult]:
    """Police every ranking stage; the reviews by stage name, which the review step uses to hold and
    reject that stage's work."""
    if not ctx.campaign.quality.enabled:
        return {}
    return {stage.name: _review_when_new(ctx, stage, evaluate_ranking, primary=False)
            for stage in ctx.campaign.stages if stage.kind == "ranking"}


def quality_pass(ctx: Context) -> ReviewResult | None:
    """Recompute decisions when new labels arrived since the last pass."""
    stage = policy_stage(ctx)
    if stage is None:
        return None
    return _review_when_new(ctx, stage, evaluate, primary=True)


def stage_collected(ctx: Context, stage_name: str) -> bool:
    """True when every planned slot of the stage has an answer or can no longer get one."""
    now = ctx.clock.now()
    with ctx.store.session() as s:
        hits = s.exec(select(HitRow).where(HitRow.campaign == ctx.name, HitRow.stage == stage_name)).all()
        got = dict(s.exec(select(AssignmentRow.hit_key, func.count()).where(AssignmentRow.campaign == ctx.name,
                                                                            AssignmentRow.stage == stage_name)
                          .group_by(AssignmentRow.hit_key)).all())
    for h in hits:
        if h.status in ("draft", "posting"):
            return False
        if h.status == "posted" and got.get(h.hit_key, 0) < h.assignments and not (h.expires_at and now >= h.expires_at):
            return False
    return True


def block_workers(ctx: Context, result: ReviewResult) -> None:
    for w in sorted(result.workers("block")):
        with ctx.store.session() as s:
            row = s.exec(select(WorkerRow).where(WorkerRow.campaign == ctx.name, WorkerRow.worker_id == w)).first()
            if row is None or row.blocked:
                continue
        try:
            ctx.market.call("create_worker_block", WorkerId=w, Reason=(result.reason(w) or "quality")[:1000])
        except (ClientError, BotoCoreError) as exc:
            ctx.store.event(ctx.name, "block_error", f"{w}: {exc}", level="warning", subject=w)
            continue
        with ctx.store.session() as s:
            row = s.exec(select(WorkerRow).where(WorkerRow.campaign == ctx.name, WorkerRow.worker_id == w)).first()
            row.blocked = True
            s.add(row)
            block_list = ctx.campaign.quality.block_list
            ctx.store.event(ctx.name, "worker_blocked", f"{w}: {result.reason(w)}", subject=w,
                            data={"block_list": block_list, **result.evidence[w].as_dict()}, session=s)


def sync_shared_blocks(ctx: Context) -> None:
    """Workers blocked by any campaign that names the same block list are blocked here too."""
    name = ctx.campaign.quality.block_list
    if not name:
        return
    from campaign.store import EventRow

    with ctx.store.session() as s:
        events = s.exec(select(EventRow).where(EventRow.kind == "worker_blocked")).all()
        mine = {r.worker_id for r in s.exec(select(WorkerRow).where(WorkerRow.campaign == ctx.name, WorkerRow.blocked == True)).all()}  # noqa: E712
        done = set(json.loads(ctx.store.get_kv(ctx.name, "shared_blocks", "[]") or "[]"))
    wanted = {e.subject for e in events if e.data and json.loads(e.data).get("block_list") == name and e.campaign != ctx.name}
    for w in sorted(wanted - mine - done):
        try:
            ctx.market.call("create_worker_block", WorkerId=w, Reason=f"blocked in block list {name}")
        except (ClientError, BotoCoreError) as exc:
            ctx.store.event(ctx.name, "block_error", f"{w}: {exc}", level="warning", subject=w)
            return
        done.add(w)
        ctx.store.set_kv(ctx.name, "shared_blocks", json.dumps(sorted(done)))
        ctx.store.event(ctx.name, "worker_blocked", f"{w}: shared block list {name}", subject=w, data={"block_list": name})


def pay_bonuses(ctx: Context, result: ReviewResult) -> None:
    """One bonus per deserving worker per campaign, on their latest approved assignment."""
    amount = Decimal(ctx.campaign.quality.bonus) if ctx.campaign.quality.bonus else None
    if amount is None:
        return
    for w in sorted(result.workers("bonus")):
        key = f"bonus:{w}"
        state = ctx.store.get_kv(ctx.name, key)
        if state == "paid":
            continue
        with ctx.store.session() as s:
            aid = s.exec(select(AssignmentRow.assignment_id).where(AssignmentRow.campaign == ctx.name, AssignmentRow.worker_id == w,
                                                                   AssignmentRow.status == "approved")
                         .order_by(AssignmentRow.assignment_id.desc())).first()
            if aid is None:
                continue
            try:
                reserve_bonus(s, ctx.name, ctx.campaign.budget, w, amount, aid)
            except BudgetExceeded as exc:
                ctx.store.event(ctx.name, "budget_stop", f"bonus for {w}: {exc}", level="warning", subject=w, session=s)
                return
            ctx.store.set_kv(ctx.name, key, "sending", session=s)
        token = hashlib.sha1(f"{ctx.name}|{ctx.instance}|bonus|{w}".encode()).hexdigest()
        try:
            ctx.market.call("send_bonus", WorkerId=w, AssignmentId=aid, BonusAmount=fmt(amount), UniqueRequestToken=token,
                            Reason=result.reason(w) or "Thank you for consistently careful work.")
        except ClientError as exc:
            code, turk, msg = error_code(exc)
            if "already been processed" not in msg:
                with ctx.store.session() as s:
                    release_bonus(s, ctx.name, w, amount, aid)
                    ctx.store.set_kv(ctx.name, key, "paid", session=s)  # refused for good: never retried
                    ctx.store.event(ctx.name, "bonus_error", f"{w}: {code} {turk}: {msg}", level="warning", subject=w, session=s)
                continue
        except BotoCoreError as exc:
            ctx.store.event(ctx.name, "bonus_error", f"{w}: {exc}", level="warning", subject=w)
            continue
        crash_point("bonus.after_call")
        with ctx.store.session() as s:
            charge_bonus(s, ctx.name, w, amount, aid)
            ctx.store.set_kv(ctx.name, key, "paid", session=s)
            ctx.store.event(ctx.name, "bonus", f"{w}: ${fmt(amount)} bonus ({result.reason(w)})", subject=w, session=s)
