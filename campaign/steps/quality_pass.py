"""Quality control on every pass: evidence from the store, decisions back into the store.

For each stage whose task kind gives evidence (`TaskKind.evidence`), the review policy is run again
whenever the stage's counted answers changed, and its result is written to the store: exclusions on
the judgments, each worker's evidence, and the review itself (`review:<stage>`), which the review,
block and bonus steps read. Exclusion is recomputed from all labels each time (a worker can be
cleared as evidence grows), so the final scores always reflect the final evidence. Every change of a
worker's standing is an event with its evidence. Blocks and bonuses are remote actions and get the
same intent-call-record care as approvals: a bonus has a deterministic token and a ledger ref, so it is
paid once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict
from decimal import Decimal
from typing import Any

from sqlalchemy import or_
from sqlmodel import col, func, select, update

from campaign.crash import crash_point
from campaign.ledger import BudgetExceeded, charge_bonus, release_bonus, reserve_bonus
from campaign.marketplaces.base import AlreadyDone, MarketError, TransientError, fees_of
from campaign.money import shown
from campaign.quality.evidence import Label, TrapResult
from campaign.quality.evidence_table import EvidenceTable
from campaign.quality.review import Decision, PolicyConfig, ReviewResult, carried_exclusions, judge
from campaign.quality.running import RestoreMismatch, RunningEvidence
from campaign.spec import Stage
from campaign.state import AssignmentStatus, BonusState, HeldKind, HitStatus, Keys
from campaign.steps.context import Context
from campaign.store import PENDING_SQL, AssignmentRow, EventRow, HitRow, JudgmentRow, WorkerRow
from campaign.tasks import get as get_kind
from campaign.tasks.kind import ReviewedJudgment, TaskKind

log = logging.getLogger(__name__)

# judgments read at a time into the running evidence: a daemon taking over a campaign of 11,750 Likert
# items read all 58,750 at once, 45 MiB at its peak (tracemalloc), which set the daemons' peaks at 470,000
EVIDENCE_PAGE = 5_000

# Rejected work stays evidence: a spammer whose work was rejected must not look clean afterwards.
COUNTED = (AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVING, AssignmentStatus.APPROVED, AssignmentStatus.REJECTING, AssignmentStatus.REJECTED)


def policed_stages(ctx: Context) -> list[Stage]:
    """The stages quality control reads, the primary one first (see `TaskKind.primary_evidence`)."""
    if not ctx.campaign.quality.enabled:
        return []
    stages = [s for s in ctx.campaign.stages if get_kind(s.kind).policed]
    primary = policy_stage(ctx)
    return ([primary] if primary is not None else []) + [s for s in stages if s is not primary]


def policy_stage(ctx: Context) -> Stage | None:
    """The primary policed stage: its evidence heads each worker's record, and it decides bonuses."""
    if not ctx.campaign.quality.enabled:
        return None
    return next((s for s in ctx.campaign.stages if get_kind(s.kind).policed and get_kind(s.kind).primary_evidence), None)


def new_judgments(ctx: Context, stage: Stage, after: int, *, upto: int | None = None,
                  items: Sequence[str] | None = None) -> tuple[list[ReviewedJudgment], int]:
    """The stage's valid judgments that count as evidence stored after row id `after`, and the last id read.

    Labels are only ever added: an assignment and its labels are stored in one transaction (so `shown`,
    counted over the rows read here, is its whole count) and every stored status counts. `upto` and
    `items` (judgments of these items only, ids up to `upto`) read a retired item's labels back
    (`running_evidence`); `shown` then counts only the rows read, so only labels may be taken from them."""
    out, last, _ = judgment_page(ctx, stage, after, upto=upto, items=items)
    return out, last


def judgment_page(ctx: Context, stage: Stage, after: int, *, upto: int | None = None,
                  items: Sequence[str] | None = None,
                  limit: int | None = None) -> tuple[list[ReviewedJudgment], int, bool]:
    """`new_judgments`, at most about `limit` of them, and whether more may follow.

    Whole assignments only: the last id read ends an assignment, so the next page starts at the next
    one's first label and `shown` stays each one's whole count. That holds because a campaign's
    judgments are written by the one daemon holding it, an assignment's in one transaction: its rows
    are contiguous among the campaign's when ordered by id."""
    with ctx.store.session() as s:
        q = (select(col(JudgmentRow.item_key), col(JudgmentRow.value), col(JudgmentRow.worker_id),  # type: ignore[call-overload]
                    col(JudgmentRow.assignment_id), col(AssignmentRow.hit_key), col(JudgmentRow.id), col(JudgmentRow.extra))
             .join(AssignmentRow, col(AssignmentRow.assignment_id) == col(JudgmentRow.assignment_id))
             .where(JudgmentRow.campaign == ctx.name, JudgmentRow.stage == stage.name, AssignmentRow.valid == True,  # noqa: E712
                    col(AssignmentRow.status).in_(COUNTED), col(JudgmentRow.id) > after))
        if upto is not None:
            q = q.where(col(JudgmentRow.id) <= upto)
        if items is not None:
            q = q.where(col(JudgmentRow.item_key).in_(list(items)))
        q = q.order_by(col(JudgmentRow.id))
        rows = list(s.exec(q if limit is None else q.limit(limit)).all())  # plain columns, not ORM objects
        full = limit is not None and len(rows) >= limit
        if full:
            last = rows[-1][3]  # its labels may go on past the page: it is read whole with the next one
            cut = len(rows)
            while cut and rows[cut - 1][3] == last:
                cut -= 1
            if cut:
                del rows[cut:]
            else:  # one assignment with more labels than a page: all of it
                rows = list(s.exec(q.where(col(JudgmentRow.assignment_id) == last)).all())
    shown: dict[str, int] = {}
    for row in rows:
        shown[row[3]] = shown.get(row[3], 0) + 1
    out = [ReviewedJudgment(item_key=item, value=value, worker_id=worker, assignment_id=aid, hit_key=hit_key,
                            shown=shown[aid], extra=_extra(extra)) for item, value, worker, aid, hit_key, _, extra in rows]
    return out, (rows[-1][5] if rows else after), full


def _extra(raw: str | None) -> dict[str, Any]:
    """A judgment's stored detail (JSON written by collect); {} when absent or not an object."""
    if not raw:
        return {}
    try:
        got = json.loads(raw)
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def running_evidence(ctx: Context, stage: Stage) -> RunningEvidence | None:
    """The stage's evidence so far, brought up to date with the judgments stored since the last pass (None:
    the stage's kind gives no evidence).

    A task kind's evidence is row by row (`TaskKind.evidence`), so this daemon asks it only about new rows
    and keeps the running sums in the Context: re-reading and re-correlating every label of the stage
    made a policy run grow with the campaign (2 s per pass at 235,000 labels). The sums are exact, so
    how the labels were split between passes changes nothing (see `campaign.quality.running`), and new
    labels are read a page at a time, as if each page were a pass: a daemon taking over a campaign (or
    restarted) reads every label of it."""
    key = f"evidence:{stage.name}"
    kept = ctx.cache.get(key)
    if kept is None:
        kept = ctx.cache[key] = {"after": 0, "book": RunningEvidence()}
    book: RunningEvidence = kept["book"]
    kind = get_kind(stage.kind)
    while True:
        before = kept["after"]
        rows, after, more = judgment_page(ctx, stage, before, limit=EVIDENCE_PAGE)
        found = kind.evidence(stage, rows)
        if found is None:
            return None
        try:
            _count_in(ctx, stage, kind, book, found, rows, before)
        except RestoreMismatch as exc:  # not what was counted (never in a run): read every label again
            log.warning("campaign %s, stage %s: %s; reading the stage's labels again", ctx.name, stage.name, exc)
            ctx.cache.pop(key, None)
            return running_evidence(ctx, stage)
        kept["after"] = after
        if not more:
            return book


def _count_in(ctx: Context, stage: Stage, kind: TaskKind, book: RunningEvidence,
              found: tuple[list[Label], list[TrapResult]], rows: list[ReviewedJudgment], before: int) -> None:
    """Add one page of judgments (`rows`, stored after row id `before`; `found`: their labels and trap
    results, by the stage's `kind`) to the book; `RestoreMismatch` leaves the book as it was."""
    labels, traps = found
    back = book.let_go({lab.item for lab in labels})
    if back:  # a repeat, a replacement or an extra slot: the item's earlier labels come back from the store
        aids = {lab.assignment for lab in labels if lab.item in back}
        keys = sorted({r.item_key for r in rows if r.assignment_id in aids})  # a label's item comes from its row's
        earlier: list[Label] = []
        for i in range(0, len(keys), 500):
            old, _ = new_judgments(ctx, stage, 0, upto=before, items=keys[i:i + 500])
            got = kind.evidence(stage, old)
            earlier += [lab for lab in (got[0] if got else []) if lab.item in back]
        book.restore(back, earlier)
    book.add(labels, traps)
    book.retire(stage.assignments)


def evaluate(ctx: Context, stage: Stage) -> ReviewResult:
    """The review policy over the stage's evidence, as its task kind states it."""
    # On Prolific no work is rejected for disagreeing: a submission is rejected only by Prolific's rules
    # (failed attention checks, exceptionally fast, no work: `campaign.prolific.verdict`); spam is excluded
    # from the scores and paid.
    config = dataclasses.replace(PolicyConfig.from_spec(ctx.campaign.quality),
                                 low_agreement_absolute=get_kind(stage.kind).low_agreement_absolute,
                                 reject_spam=ctx.campaign.quality.reject_spam and ctx.campaign.prolific is None)
    book = running_evidence(ctx, stage)
    return judge(book.evidence(config.min_shared) if book is not None else {}, config)


def _dump(n: int, result: ReviewResult) -> str:
    return json.dumps({"n": n, "evidence": {w: asdict(e) for w, e in result.evidence.items()},
                       "decisions": [[d.kind, d.worker, d.reason, dict(d.evidence)] for d in result.decisions]})


def stage_review(ctx: Context, stage: Stage) -> ReviewResult | None:
    """The stage's latest review as the quality step stored it (None before the first pass).

    The parsed review is kept in the Context beside the stored text it came from and given again while
    the store holds that same text: a pass asks for it four or five times (quality, blocks, review,
    shut-out, the labels left out), and parsing every worker's evidence each time was 6% of a daemon's
    CPU at 470,000 propositions. The store is still read each time, so a review another process wrote
    is seen at once. Callers must not change the result."""
    saved = ctx.store.get_kv(ctx.name, Keys.review(stage.name))
    return None if saved is None else _kept_review(ctx, stage, saved)[1]


def _kept_review(ctx: Context, stage: Stage, saved: str) -> tuple[int, ReviewResult]:
    """(answers counted when it was made, the review) of the stored review text `saved`, from the
    Context while it is the same text (known by its hash and length: the text itself, ~200 bytes a
    worker, is not kept beside its parse; two texts with one 64-bit hash and one length would give the
    older parse until the review changes again)."""
    key = f"{REVIEW_PARSED}{stage.name}"
    sign = (hash(saved), len(saved))
    kept = ctx.cache.get(key)
    if isinstance(kept, tuple) and kept[0] == sign:
        return kept[1], kept[2]
    data = json.loads(saved)
    # the evidence as columns (`EvidenceTable`): a daemon keeps this parse for each stage of each of its
    # campaigns, and a WorkerEvidence object a worker took ~230 bytes
    result = ReviewResult(evidence=EvidenceTable(data["evidence"]),
                          decisions=[Decision(kind, worker, reason, evidence) for kind, worker, reason, evidence in data["decisions"]])
    ctx.cache[key] = (sign, int(data["n"]), result)
    return int(data["n"]), result


REVIEW_PARSED = "quality:parsed-review:"  # Context.cache: per stage, (the stored text's hash and length, its n, its parse)


def stage_reviews(ctx: Context) -> dict[str, ReviewResult]:
    """Every policed stage's latest review by stage name, the primary stage first."""
    out = {}
    for stage in policed_stages(ctx):
        result = stage_review(ctx, stage)
        if result is not None:
            out[stage.name] = result
    return out


def quality_pass(ctx: Context) -> int:
    """Review every policed stage whose counted answers changed since its last review; returns how many
    stages were reviewed again."""
    primary = policy_stage(ctx)
    done = 0
    for stage in policed_stages(ctx):
        with ctx.store.session() as s:
            n = int(s.exec(select(func.count()).select_from(AssignmentRow).where(
                AssignmentRow.campaign == ctx.name, AssignmentRow.stage == stage.name, col(AssignmentRow.status).in_(COUNTED))).one())
        saved = ctx.store.get_kv(ctx.name, Keys.review(stage.name))
        reviewed, previous = _kept_review(ctx, stage, saved) if saved is not None else (0, None)
        if previous is not None and not _due(ctx, stage, reviewed, n):
            continue
        if n < reviewed:  # answers went away (never in a run): read every label again
            ctx.cache.pop(f"evidence:{stage.name}", None)
        result = evaluate(ctx, stage)
        apply(ctx, stage, result, primary=stage is primary, previous=previous)
        leave_out_labels(ctx, stage, result)  # before the review is stored: a crash in between reviews again
        ctx.store.set_kv(ctx.name, Keys.review(stage.name), _dump(n, result))
        done += 1
    if done:
        _give_back_memory()
    return done


def leave_out_labels(ctx: Context, stage: Stage, result: ReviewResult) -> None:
    """Mark the judgments quality control leaves out of the scores after `stage`'s new review (`result`),
    in every policed stage: those of the workers any stage's review excluded
    (`campaign.quality.review.carried_exclusions`). A stage's labels that come afterwards are marked at
    its own next review, as its own exclusions are."""
    reviews = {**stage_reviews(ctx), stage.name: result}
    order = [s.name for s in ctx.campaign.stages if s.name in reviews]
    left_out = carried_exclusions(order, {name: r.excluded for name, r in reviews.items()})
    with ctx.store.session() as s:
        for name in order:
            excluded = sorted(left_out[name])
            # one statement per direction rather than every judgment of the stage as an ORM object
            stage_rows = (col(JudgmentRow.campaign) == ctx.name, col(JudgmentRow.stage) == name)
            s.execute(update(JudgmentRow).where(*stage_rows, col(JudgmentRow.excluded) == True,  # noqa: E712
                                                col(JudgmentRow.worker_id).not_in(excluded))
                      .values(excluded=False))
            if excluded:
                s.execute(update(JudgmentRow).where(*stage_rows, col(JudgmentRow.excluded) == False,  # noqa: E712
                                                    col(JudgmentRow.worker_id).in_(excluded))
                          .values(excluded=True))


def _give_back_memory() -> None:
    """A policy run over a large stage builds several objects per label and drops them again; glibc
    may keep the freed memory in the process, so the daemon's size can ratchet up with each run (its
    peak RSS was 659 MiB at 47,000 assignments). Hand the free pages back (Linux/glibc; elsewhere
    nothing to do)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


GROWTH = 0.05  # re-review a stage when its counted answers grew by this share (or it is fully collected)
MIN_GROWTH = 1


def _due(ctx: Context, stage: Stage, reviewed: int, n: int) -> bool:
    """Whether the stage's evidence changed enough to run the policy again.

    The policy reads every label of the stage, so running it on every new answer makes a campaign's
    total quality-control cost quadratic in its size; running it when the answers grew by 5% keeps the
    total linear (a geometric series), and the evidence a decision sees is at most 5% short of what is
    stored. Once the stage is fully collected every change counts, so the final exclusions and scores
    are computed from the final evidence.
    """
    if n == reviewed:
        return False
    if n - reviewed >= max(MIN_GROWTH, int(reviewed * GROWTH)) or n < reviewed:
        return True
    return stage_collected(ctx, stage.name)


def changed_workers(result: ReviewResult, previous: ReviewResult) -> set[str]:
    """The workers whose evidence, exclusion or reason in this stage differs from the previous review's."""
    was, now = previous.reasons(), result.reasons()
    old_x, new_x = previous.excluded, result.excluded
    return {w for w in set(result.evidence) | set(previous.evidence) | set(was) | set(now)
            if result.evidence.get(w) != previous.evidence.get(w) or was.get(w) != now.get(w)
            or (w in old_x) != (w in new_x)}


def apply(ctx: Context, stage: Stage, result: ReviewResult, primary: bool = True,
          previous: ReviewResult | None = None) -> None:
    """Write one stage's exclusions and each worker's evidence; an event for every change of standing.

    A worker's row keeps the evidence of every policed stage under "stages"; the primary (Likert)
    stage's evidence also sits at the top, where the dashboard reads it. A worker is excluded when any
    stage excludes them, and their labels are left out of every stage (`leave_out_labels`).

    `previous`: the stage's review this one follows, as stored (and so as applied: it is stored only
    after this step commits). Only the workers whose figures changed since are read and written;
    every worker row of the campaign, read, parsed and compared on each review, was half of quality
    control's time at 470,000 propositions. None: every worker.
    """
    excluded = result.excluded
    reasons = result.reasons()
    with ctx.store.session() as s:
        q = select(WorkerRow).where(WorkerRow.campaign == ctx.name)
        if previous is None:
            rows = list(s.exec(q).all())
        else:
            names = sorted(changed_workers(result, previous))
            rows = [w for i in range(0, len(names), 500) for w in s.exec(q.where(col(WorkerRow.worker_id).in_(names[i:i + 500]))).all()]
        for w in rows:
            e = result.evidence.get(w.worker_id)
            old = json.loads(w.evidence) if w.evidence else {}
            stages = dict(old.get("stages", {}))
            if e is None and stage.name not in stages:
                continue
            stages[stage.name] = {**(e.as_dict() if e else {}), "excluded": w.worker_id in excluded,
                                  "reason": reasons.get(w.worker_id)}
            top = (e.as_dict() if e else {}) if primary else {k: v for k, v in old.items() if k != "stages"}
            if "competence" in old and "competence" not in top:
                top["competence"] = old["competence"]
            now_excluded = any(v.get("excluded") for v in stages.values())
            said = [f"{name}: {v['reason']}" if len(stages) > 1 else v["reason"]
                    for name, v in sorted(stages.items()) if v.get("excluded") and v.get("reason")]
            reason = "; ".join(said) or reasons.get(w.worker_id)
            evidence = json.dumps({**top, "stages": stages}, sort_keys=True)
            if now_excluded != w.excluded:
                ctx.store.event(ctx.name, "worker_excluded" if now_excluded else "worker_included",
                                f"{w.worker_id}: {reason or 'evidence improved'}", subject=w.worker_id,
                                data=stages, session=s)
            if (w.excluded, w.reason, w.evidence) != (now_excluded, reason, evidence):
                w.excluded, w.reason, w.evidence = now_excluded, reason, evidence
                s.add(w)


def stage_collected(ctx: Context, stage_name: str) -> bool:
    """True when every planned slot of the stage has an answer or can no longer get one.

    One query that stops at the first open HIT still missing answers, so a review pass costs the same
    however many assignments the stage has."""
    now = ctx.clock.now()
    with ctx.store.session() as s:
        stage_hits = (HitRow.campaign == ctx.name, HitRow.stage == stage_name)
        if s.exec(select(HitRow.id).where(*stage_hits, PENDING_SQL).limit(1)).first():  # drafts: the partial index
            return False
        got = (select(func.count()).select_from(AssignmentRow)
               .where(AssignmentRow.campaign == HitRow.campaign, AssignmentRow.hit_key == HitRow.hit_key).scalar_subquery())
        waiting = s.exec(select(HitRow.id).where(
            *stage_hits, HitRow.status == HitStatus.POSTED,
            or_(col(HitRow.expires_at).is_(None), col(HitRow.expires_at) == 0, col(HitRow.expires_at) > now),
            got < col(HitRow.assignments)).limit(1)).first()
    return waiting is None


def block_workers(ctx: Context, result: ReviewResult) -> None:
    """Block every worker the review says to block; one that fails is tried again next pass, the others
    are blocked now (invariant 8)."""
    from campaign.steps.isolation import note_once

    for w in sorted(result.workers("block")):
        try:
            _block(ctx, result, w)
        except Exception as exc:
            note_once(ctx, "blocks", w, exc)


def _block(ctx: Context, result: ReviewResult, w: str) -> None:
    with ctx.store.session() as s:
        row = s.exec(select(WorkerRow).where(WorkerRow.campaign == ctx.name, WorkerRow.worker_id == w)).first()
        if row is None or row.blocked:
            return
    try:
        ctx.market.block(w, result.reason(w) or "quality")
    except MarketError as exc:
        ctx.store.event(ctx.name, "block_error", f"{w}: {exc}", level="warning", subject=w)
        return
    with ctx.store.session() as s:
        row = s.exec(select(WorkerRow).where(WorkerRow.campaign == ctx.name, WorkerRow.worker_id == w)).first()
        if row is None:
            return
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
    with ctx.store.session() as s:
        events = s.exec(select(EventRow).where(EventRow.kind == "worker_blocked")).all()
        mine = {r.worker_id for r in s.exec(select(WorkerRow).where(WorkerRow.campaign == ctx.name, WorkerRow.blocked == True)).all()}  # noqa: E712
        done = set(json.loads(ctx.store.get_kv(ctx.name, Keys.SHARED_BLOCKS, "[]") or "[]"))
    wanted = {e.subject for e in events if e.subject and e.data and json.loads(e.data).get("block_list") == name
              and e.campaign != ctx.name}
    for w in sorted(wanted - mine - done):
        try:
            ctx.market.block(w, f"blocked in block list {name}")
        except MarketError as exc:
            ctx.store.event(ctx.name, "block_error", f"{w}: {exc}", level="warning", subject=w)
            return
        done.add(w)
        ctx.store.set_kv(ctx.name, Keys.SHARED_BLOCKS, json.dumps(sorted(done)))
        ctx.store.event(ctx.name, "worker_blocked", f"{w}: shared block list {name}", subject=w, data={"block_list": name})


def blocks(ctx: Context) -> None:
    """The blocks step: workers every stored review says to block, then the shared block list."""
    for result in stage_reviews(ctx).values():
        block_workers(ctx, result)
    sync_shared_blocks(ctx)


def bonuses(ctx: Context) -> None:
    """The bonus step: once every stage is done, from the primary stage's final review."""
    from campaign.steps.stages import all_done

    stage = policy_stage(ctx)
    if stage is None or not all_done(ctx):
        return
    result = stage_review(ctx, stage)
    if result is not None:
        pay_bonuses(ctx, result)


def bonus_token(ctx: Context, worker_id: str) -> str:
    """A bonus's idempotency token: the same for every attempt, the quality step's and the operator's."""
    return hashlib.sha1(f"{ctx.name}|{ctx.instance}|bonus|{worker_id}".encode()).hexdigest()


def pay_bonuses(ctx: Context, result: ReviewResult) -> None:
    """One bonus per deserving worker per campaign, on their latest approved assignment."""
    amount = Decimal(ctx.campaign.quality.bonus) if ctx.campaign.quality.bonus else None
    if amount is None:
        return
    for w in sorted(result.workers("bonus")):
        key = Keys.bonus(w)
        state = ctx.store.get_kv(ctx.name, key)
        if state in (BonusState.PAID, BonusState.HELD):
            continue
        try:
            if not _pay_bonus(ctx, result, w, amount):
                return
        except Exception as exc:  # a failure of ours on this bonus: held, reserved, not sent; the others are paid
            _hold_bonus(ctx, result, w, amount, exc)


class _SendFailed(Exception):
    """The bonus call itself raised something other than a marketplace error: it may have been paid."""


def _hold_bonus(ctx: Context, result: ReviewResult, w: str, amount: Decimal, exc: Exception) -> None:
    from campaign.steps.isolation import hold

    key = Keys.bonus(w)
    with ctx.store.session() as s:
        aid = s.exec(select(AssignmentRow.assignment_id).where(AssignmentRow.campaign == ctx.name, AssignmentRow.worker_id == w,
                                                               AssignmentRow.status == AssignmentStatus.APPROVED)
                     .order_by(col(AssignmentRow.assignment_id).desc())).first()
        sent = isinstance(exc, _SendFailed)
        ctx.store.set_kv(ctx.name, key, BonusState.HELD, session=s)
        hold(ctx, HeldKind.BONUS, key, "bonuses", exc.__cause__ if sent and exc.__cause__ is not None else exc, worker_id=w, session=s,
             data={"amount": str(amount), "assignment_id": aid, "reason": result.reason(w), "may_have_been_sent": sent})


def _pay_bonus(ctx: Context, result: ReviewResult, w: str, amount: Decimal) -> bool:
    """One worker's bonus: reserve, send, book. False when the budget cannot cover it (no more bonuses)."""
    key = Keys.bonus(w)
    with ctx.store.session() as s:
        aid = s.exec(select(AssignmentRow.assignment_id).where(AssignmentRow.campaign == ctx.name, AssignmentRow.worker_id == w,
                                                               AssignmentRow.status == AssignmentStatus.APPROVED)
                     .order_by(col(AssignmentRow.assignment_id).desc())).first()
        if aid is None:
            return True
        try:
            reserve_bonus(s, ctx.name, ctx.campaign.budget, w, amount, aid, fees_of(ctx.market))
        except BudgetExceeded as exc:
            ctx.store.event(ctx.name, "budget_stop", f"bonus for {w}: {exc}", level="warning", subject=w, session=s)
            return False
        ctx.store.set_kv(ctx.name, key, BonusState.SENDING, session=s)
    token = bonus_token(ctx, w)
    try:
        ctx.market.bonus(w, aid, amount, result.reason(w) or "Thank you for consistently careful work.", token)
    except AlreadyDone:
        pass  # paid by an earlier attempt whose answer was lost: book it below
    except TransientError as exc:
        ctx.store.event(ctx.name, "bonus_error", f"{w}: {exc}", level="warning", subject=w)
        return True  # reserved and "sending": tried again with the same token next pass
    except MarketError as exc:
        with ctx.store.session() as s:
            release_bonus(s, ctx.name, w, amount, aid, fees_of(ctx.market))
            ctx.store.set_kv(ctx.name, key, BonusState.PAID, session=s)  # refused for good: never retried
            ctx.store.event(ctx.name, "bonus_error", f"{w}: {exc}", level="warning", subject=w, session=s)
        return True
    except Exception as exc:  # not the marketplace's answer: the bonus may or may not have been paid
        raise _SendFailed(str(exc)) from exc
    crash_point("bonus.after_call")
    with ctx.store.session() as s:
        charge_bonus(s, ctx.name, w, amount, aid, fees_of(ctx.market))
        ctx.store.set_kv(ctx.name, key, BonusState.PAID, session=s)
        ctx.store.event(ctx.name, "bonus", f"{w}: {shown(amount, ctx.campaign.currency)} bonus ({result.reason(w)})", subject=w, session=s)
    return True
