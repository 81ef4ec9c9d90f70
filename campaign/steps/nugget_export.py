"""The gold nuggets of a nugget stage (seed 002 §3.4), with MACE competences over token labels.

Each stored answer holds, per sentence shown, the worker's spans as token offsets — including the
sentences where they marked nothing — so every (sentence, token) has an explicit 0/1 label from every
worker who saw it. MACE over those labels says which workers to trust; the gold set is the spans that
`min_workers` distinct workers selected exactly (>= `min_nugget_tokens` tokens, overlaps merged keeping
the longest), each reported with its worker count and the summed MACE competence of its workers.
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlmodel import select

from campaign.aggregate.gold_nuggets import SpanVote, gold_nuggets
from campaign.aggregate.mace import MACE
from campaign.spec import Stage
from campaign.steps.context import Context
from campaign.store import AssignmentRow, ItemRow, JudgmentRow


def nugget_gold(ctx: Context, stage: Stage) -> tuple[list[dict], dict[str, float]]:
    with ctx.store.session() as s:
        rows = s.exec(
            select(JudgmentRow.item_key, JudgmentRow.worker_id, JudgmentRow.extra, AssignmentRow.hit_key)
            .join(AssignmentRow, AssignmentRow.assignment_id == JudgmentRow.assignment_id)
            .where(JudgmentRow.campaign == ctx.name, JudgmentRow.stage == stage.name, JudgmentRow.excluded == False,  # noqa: E712
                   AssignmentRow.status == "approved")
            .order_by(JudgmentRow.item_key, JudgmentRow.worker_id)
        ).all()
        texts = dict(s.exec(select(ItemRow.item_key, ItemRow.text).where(ItemRow.campaign == ctx.name)).all())
    votes, labels = [], []
    for item, worker, extra, hit_key in rows:
        spans = json.loads(extra).get("spans", []) if extra else []
        n_tokens = len(texts.get(item, "").split())
        marked = set()
        for a, b in spans:
            votes.append(SpanVote(hit=(hit_key, item), worker=worker, start=a, end=b + 1, tokens=b - a + 1))
            marked.update(range(a, b + 1))
        labels.extend(((item, t), worker, int(t in marked)) for t in range(n_tokens))
    competence: dict[str, float] = {}
    if labels and len({w for _, w, _ in labels}) > 1:
        competence = MACE(seed=ctx.seed, n_restarts=5).fit(labels).competence_
    gold = gold_nuggets(votes, min_workers=stage.min_workers, min_tokens=stage.min_nugget_tokens)
    weights = {}
    for v in votes:
        weights.setdefault((v.hit, v.start, v.end), set()).add(v.worker)
    out = []
    for g in gold:
        hit_key, item = g.hit
        toks = texts.get(item, "").split()
        workers = weights[(g.hit, g.start, g.end)]
        out.append({"hit": hit_key, "item": item, "first": g.start, "last": g.end - 1, "workers": g.workers,
                    "mace_weight": round(sum(competence.get(w, 0.0) for w in workers), 4),
                    "text": " ".join(toks[g.start:g.end])})
    return out, competence


def write_gold(out_dir: Path, gold: list[dict]) -> Path:
    from campaign.steps.finish import _atomic_write

    path = out_dir / "gold_nuggets.jsonl"
    _atomic_write(path, "".join(json.dumps(g, ensure_ascii=False) + "\n" for g in gold))
    return path
