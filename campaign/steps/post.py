"""Posting HITs, crash-safe.

For each draft: reserve its cost and mark it `posting` in one transaction (the intent), then call
CreateHITWithHITType with the draft's deterministic UniqueRequestToken and RequesterAnnotation, then
record the HIT id. A crash anywhere leaves either a draft (nothing happened), or a `posting` row whose
token makes the repeated call answer HitAlreadyExists with the HIT's id; past the token's 24 hours the
HIT is found by its annotation instead.
"""

from __future__ import annotations

import re
from decimal import Decimal

from botocore.exceptions import BotoCoreError, ClientError
from sqlmodel import select

from campaign.ledger import BudgetExceeded, release_hit_rest, reserve_hit
from campaign.spec import Stage
from campaign.steps.context import Context, crash_point, log
from campaign.store import CampaignRow, HitRow, ItemRow
from campaign.tasks import render_hit
from campaign.tasks.base import ShownItem

HIT_ID_RE = re.compile(r"\b([A-Z0-9]{30})\b")
TOKEN_LIFETIME = 24 * 3600
TRANSIENT_CODES = {"ServiceFault", "ThrottlingException", "Throttling", "ServiceUnavailable", "InternalFailure"}


def error_code(exc: ClientError) -> tuple[str, str, str]:
    """(error code, TurkErrorCode, message) of a marketplace error."""
    resp = exc.response or {}
    err = resp.get("Error", {})
    turk = resp.get("TurkErrorCode") or err.get("TurkErrorCode") or ""
    return err.get("Code", ""), turk, err.get("Message", "") or resp.get("Message", "")


def hit_type_id(ctx: Context, stage: Stage) -> str:
    """CreateHITType is deterministic on MTurk: identical parameters give the same id, so no state is needed."""
    from campaign.quality.qualifications import requirements

    resp = ctx.market.call(
        "create_hit_type",
        Title=stage.title,
        Description=stage.description,
        Reward=str(stage.reward),
        AssignmentDurationInSeconds=stage.duration,
        AutoApprovalDelayInSeconds=stage.auto_approval_delay,
        Keywords=stage.keywords,
        QualificationRequirements=requirements(stage.qualifications, sandbox=ctx.campaign.marketplace != "mturk"),
    )
    return resp["HITTypeId"]


def _question(ctx: Context, stage: Stage, hit: HitRow) -> str:
    with ctx.store.session() as s:
        rows = {r.item_key: r for r in s.exec(select(ItemRow).where(ItemRow.campaign == ctx.name, ItemRow.item_key.in_(hit.keys()))).all()}
    items = [ShownItem(key=k, text=rows[k].text) for k in hit.keys()]
    return render_hit(stage, items, ctx.campaign.topic)


def _campaign_status(ctx: Context) -> str:
    with ctx.store.session() as s:
        row = s.get(CampaignRow, ctx.name)
        return row.status if row else "running"


def post_pending(ctx: Context, limit: int = 200, only_interrupted: bool = False) -> int:
    """Post up to `limit` drafts (and finish interrupted posts); returns how many HITs went up.

    `only_interrupted` finishes posts that a crash cut short without starting new ones (cancelling).
    """
    posted = 0
    type_ids: dict[str, str] = {}
    with ctx.store.session() as s:
        pending = s.exec(
            select(HitRow).where(HitRow.campaign == ctx.name, HitRow.status.in_(("draft", "posting"))).order_by(HitRow.id)
        ).all()
    if only_interrupted:
        pending = [h for h in pending if h.status == "posting"]
    for hit in pending[:limit]:
        if not only_interrupted and _campaign_status(ctx) != "running":
            break
        stage = ctx.campaign.stage(hit.stage)
        if hit.status == "draft":
            try:
                with ctx.store.session() as s:
                    row = s.get(HitRow, hit.id)
                    if row.status != "draft":
                        continue
                    amount = reserve_hit(s, ctx.name, ctx.campaign.budget, row.hit_key, Decimal(row.reward), row.assignments)
                    row.status = "posting"
                    row.reserved = str(amount)
                    row.posting_started_at = ctx.clock.now()
                    s.add(row)
                    hit = row
            except BudgetExceeded as exc:
                ctx.store.event(ctx.name, "budget_stop", str(exc), level="warning", subject=hit.hit_key)
                break
        crash_point("post.before_call")
        try:
            if stage.name not in type_ids:
                type_ids[stage.name] = hit_type_id(ctx, stage)
            hit_id = _create_or_find(ctx, stage, hit, type_ids[stage.name])
        except ClientError as exc:
            code, turk, message = error_code(exc)
            if code in TRANSIENT_CODES:
                ctx.store.event(ctx.name, "throttled" if "Throttl" in code else "marketplace_error",
                                f"posting {hit.hit_key}: {code}: {message}", level="warning", subject=hit.hit_key)
                break  # try again on the next tick, with the same token
            _fail(ctx, hit, f"{code} {turk}: {message}".strip())
            continue
        except BotoCoreError as exc:  # connection trouble: the call may or may not have happened
            ctx.store.event(ctx.name, "marketplace_error", f"posting {hit.hit_key}: {exc}", level="warning", subject=hit.hit_key)
            break
        crash_point("post.after_call")
        _record_posted(ctx, hit, hit_id)
        posted += 1
    return posted


def _create_or_find(ctx: Context, stage: Stage, hit: HitRow, type_id: str) -> dict:
    """Call CreateHIT with the draft's token; reconcile HitAlreadyExists and stale tokens."""
    if hit.posting_started_at is not None and ctx.clock.now() - hit.posting_started_at > TOKEN_LIFETIME - 600:
        found = find_by_annotation(ctx, hit.annotation)
        if found is not None:
            return found
        with ctx.store.session() as s:  # the old token may be forgotten: a new attempt gets a new token
            row = s.get(HitRow, hit.id)
            row.token_attempt += 1
            row.token = ctx.token(row.hit_key, row.token_attempt)
            row.posting_started_at = ctx.clock.now()
            s.add(row)
            hit.token, hit.token_attempt = row.token, row.token_attempt
    try:
        resp = ctx.market.call(
            "create_hit_with_hit_type",
            HITTypeId=type_id,
            MaxAssignments=hit.assignments,
            LifetimeInSeconds=stage.lifetime,
            Question=_question(ctx, stage, hit),
            RequesterAnnotation=hit.annotation,
            UniqueRequestToken=hit.token,
        )
        return resp["HIT"]
    except ClientError as exc:
        code, turk, message = error_code(exc)
        if turk.endswith("HitAlreadyExists") or "HitAlreadyExists" in code:
            m = HIT_ID_RE.search(message)
            if m:
                existing = ctx.market.call("get_hit", HITId=m.group(1))["HIT"]
                if existing.get("RequesterAnnotation") == hit.annotation:
                    ctx.store.event(ctx.name, "reconciled", f"{hit.hit_key} was already posted as {m.group(1)}", subject=hit.hit_key)
                    return existing
            found = find_by_annotation(ctx, hit.annotation)
            if found is not None:
                return found
        raise


def find_by_annotation(ctx: Context, annotation: str) -> dict | None:
    for h in ctx.market.paginate("list_hits", "HITs"):
        if h.get("RequesterAnnotation") == annotation:
            return h
    return None


def _record_posted(ctx: Context, hit: HitRow, remote: dict) -> None:
    exp = remote.get("Expiration")
    with ctx.store.session() as s:
        row = s.get(HitRow, hit.id)
        row.hit_id = remote["HITId"]
        row.hit_type_id = remote.get("HITTypeId")
        row.status = "posted"
        row.posted_at = ctx.clock.now()
        row.expires_at = exp.timestamp() if hasattr(exp, "timestamp") else (float(exp) if exp else None)
        s.add(row)
        log.debug("posted %s as %s", row.hit_key, row.hit_id)


def _fail(ctx: Context, hit: HitRow, why: str) -> None:
    with ctx.store.session() as s:
        row = s.get(HitRow, hit.id)
        row.status = "failed"
        row.error = why[:1000]
        s.add(row)
        release_hit_rest(s, ctx.name, row.hit_key)
        ctx.store.event(ctx.name, "post_failed", f"{row.hit_key}: {why}", level="error", subject=row.hit_key, session=s)
