"""The ranking stage: shortlist from the earlier stage, then adaptive batches of comparisons.

Each batch is planned only when the previous one is fully decided: the online TrueSkill model is
rebuilt by replaying every counted ranking in a fixed order (so a restart, or a second run with the same
seed, rebuilds the same model), the next `batch_pairs` pairs are chosen by `campaign.plan.pairs`, packed
into 5-item HITs, and written as drafts in one transaction with the batch's record. A crash between
batches replans the same batch; a crash inside one resumes its drafts. The stage is complete when the
pair budget (or the target confidence) is reached and every HIT is closed.
"""

from __future__ import annotations

import json

from sqlmodel import func, select

from campaign.aggregate.trueskill_online import OnlineRanker
from campaign.money import fmt
from campaign.plan.pack import pack_pairs
from campaign.plan.pairs import count_matrix, pair_budget, select_pairs, should_stop
from campaign.spec import Stage
from campaign.steps.context import Context
from campaign.store import AssignmentRow, HitRow, JudgmentRow, KVRow
from campaign.tasks.base import TRAP_PREFIX

OPEN = ("draft", "posting", "posted")


def shortlist(ctx: Context, stage: Stage) -> list[str]:
    """Top `shortlist` items of the source stage, plus every item tied with the last one (seed 000 §5.4).
    Computed once and stored: later QC changes to the source stage cannot reshuffle a running stage."""
    key = f"shortlist:{stage.name}"
    saved = ctx.store.get_kv(ctx.name, key)
    if saved is not None:
        return json.loads(saved)
    from campaign.steps.finish import compute_scores

    source = ctx.campaign.stage(stage.source) if stage.source else ctx.campaign.stages[0]
    scores = compute_scores(ctx.store, ctx.name, source.name, source.kind)
    if len(scores) > stage.shortlist:
        cut = scores[stage.shortlist - 1]["score"]
        chosen = [r["item"] for r in scores if r["score"] >= cut]
    else:
        chosen = [r["item"] for r in scores]
    ctx.store.set_kv(ctx.name, key, json.dumps(chosen))
    ctx.store.event(ctx.name, "shortlist", f"stage {stage.name}: {len(chosen)} items shortlisted from {source.name}")
    return chosen


def rankings(ctx: Context, stage: Stage) -> list[list[str]]:
    """Every counted ranking of the stage (approved, not excluded), best first, in a fixed order."""
    with ctx.store.session() as s:
        rows = s.exec(
            select(JudgmentRow.assignment_id, JudgmentRow.item_key, JudgmentRow.value, AssignmentRow.hit_key, AssignmentRow.worker_id)
            .join(AssignmentRow, AssignmentRow.assignment_id == JudgmentRow.assignment_id)
            .where(JudgmentRow.campaign == ctx.name, JudgmentRow.stage == stage.name, JudgmentRow.excluded == False,  # noqa: E712
                   AssignmentRow.status == "approved")
        ).all()
    by_assignment: dict[str, tuple[tuple[str, str], list[tuple[float, str]]]] = {}
    for aid, item, value, hit_key, worker in rows:
        by_assignment.setdefault(aid, ((hit_key, worker), []))[1].append((value, item))
    ordered = sorted(by_assignment.values(), key=lambda v: v[0])
    return [[item for _, item in sorted(vals) if not item.startswith(TRAP_PREFIX)] for _, vals in ordered]


def online_model(items: list[str], ranks: list[list[str]]) -> OnlineRanker:
    model = OnlineRanker(items)
    known = set(items)
    for r in ranks:
        r = [i for i in r if i in known]
        if len(r) >= 2:
            model.update_ranking(r)
    return model


def with_traps(ctx: Context, stage: Stage, hits: list[tuple], batch: int) -> list[tuple]:
    """A `traps.share` of the batch's HITs get one trap sentence at a random position (it must end up
    last, or near it); deterministic in the seed and batch."""
    if stage.traps.share <= 0 or not hits:
        return hits
    from campaign.crowd.models import rng_for

    traps = [f"{TRAP_PREFIX}{stage.name}:{j}" for j in range(len(stage.traps.texts))]
    rng = rng_for("ranking-traps", ctx.name, stage.name, ctx.seed, batch)
    n = int(round(stage.traps.share * len(hits)))
    chosen = set(int(i) for i in rng.choice(len(hits), size=n, replace=False)) if n else set()
    out = []
    for k, group in enumerate(hits):
        group = list(group)
        if k in chosen:
            group.insert(int(rng.integers(0, len(group) + 1)), traps[int(rng.integers(0, len(traps)))])
        out.append(tuple(group))
    return out


def stage_complete(ctx: Context, stage: Stage) -> bool:
    return ctx.store.get_kv(ctx.name, f"stage_complete:{stage.name}") == "1"


def plan_next_batch(ctx: Context, stage: Stage) -> int:
    """Plan the next batch if the previous one is done; returns the number of HITs planned (0 if none)."""
    if stage_complete(ctx, stage):
        return 0
    with ctx.store.session() as s:
        open_hits = s.exec(select(func.count()).select_from(HitRow).where(
            HitRow.campaign == ctx.name, HitRow.stage == stage.name, HitRow.status.in_(OPEN))).one()
        batches = s.exec(select(func.max(HitRow.batch)).where(HitRow.campaign == ctx.name, HitRow.stage == stage.name)).one()
    if open_hits:
        return 0
    items = shortlist(ctx, stage)
    if len(items) < stage.items_per_hit:
        ctx.store.set_kv(ctx.name, f"stage_complete:{stage.name}", "1")
        ctx.store.event(ctx.name, "stage_complete", f"stage {stage.name}: only {len(items)} items, nothing to rank", level="warning")
        return 0
    planned = json.loads(ctx.store.get_kv(ctx.name, f"pairs_planned:{stage.name}", "[]"))
    budget = pair_budget(len(items), stage.pair_budget)
    model = online_model(items, rankings(ctx, stage))
    means, sigmas = model.means(), model.sigmas()
    stop, why = should_stop(len(items), len(planned), means, sigmas, keep=min(stage.keep, len(items) - 1),
                            budget=budget, target=stage.target_confidence)
    batch = 0 if batches is None else int(batches) + 1
    if batch > 0:
        ctx.store.set_kv(ctx.name, f"ranking_batch:{stage.name}:{batch - 1:04d}",
                         json.dumps({"mean_sigma": sum(sigmas) / len(sigmas), "pairs_planned": len(planned)}))
    if stop:
        ctx.store.set_kv(ctx.name, f"stage_complete:{stage.name}", "1")
        ctx.store.event(ctx.name, "stage_complete", f"stage {stage.name}: {why}")
        return 0
    counts = count_matrix(items, [tuple(p) for p in planned])
    want = min(stage.batch_pairs, budget - len(planned))
    pairs = select_pairs(items, means, sigmas, keep=min(stage.keep, len(items) - 1), batch_pairs=want, counts=counts,
                         seed=ctx.seed * 1000 + batch)
    if not pairs:
        ctx.store.set_kv(ctx.name, f"stage_complete:{stage.name}", "1")
        return 0
    by_sigma = [i for _, i in sorted(zip((-s for s in sigmas), items))]
    hits = with_traps(ctx, stage, pack_pairs(pairs, size=stage.items_per_hit, fill=by_sigma), batch)
    with ctx.store.session() as s:
        for k, group in enumerate(hits):
            hit_key = f"{stage.name}-b{batch:03d}-{k:04d}"
            s.add(HitRow(campaign=ctx.name, stage=stage.name, hit_key=hit_key, batch=batch, item_keys=json.dumps(list(group)),
                         annotation=ctx.annotation(stage.name, hit_key), token=ctx.token(hit_key, 0), reward=fmt(stage.reward),
                         assignments=stage.assignments))
        row = s.exec(select(KVRow).where(KVRow.campaign == ctx.name, KVRow.key == f"pairs_planned:{stage.name}")).first()
        value = json.dumps(planned + [list(p) for p in pairs])
        if row is None:
            s.add(KVRow(campaign=ctx.name, key=f"pairs_planned:{stage.name}", value=value))
        else:
            row.value = value
            s.add(row)
        ctx.store.event(ctx.name, "batch_planned", f"stage {stage.name} batch {batch}: {len(pairs)} pairs in {len(hits)} HITs",
                        session=s)
    return len(hits)
