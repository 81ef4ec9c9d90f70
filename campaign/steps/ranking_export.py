"""The final ranking of a two-stage campaign: a Bradley–Terry refit over every counted comparison of
the ranking stage, with a standard error per item, beside the Likert evidence of the first stage.

The online TrueSkill model only picks pairs; exported scores come from the batch refit, which uses all
comparisons at once and does not depend on the order answers arrived in.
"""

from __future__ import annotations

from campaign.aggregate.bradley_terry import fit_bradley_terry
from campaign.spec import Stage
from campaign.steps.batches import rankings, shortlist
from campaign.steps.context import Context
from campaign.steps.finish import compute_scores
from campaign.tasks.base import Judgment
from campaign.tasks.ranking import pairs as ranking_pairs


def ranking_scores(ctx: Context, stage: Stage) -> list[dict]:
    items = shortlist(ctx, stage)
    known = set(items)
    comparisons = []
    for r in rankings(ctx, stage):
        r = [i for i in r if i in known]
        comparisons.extend(ranking_pairs([Judgment(item_key=k, value=float(p)) for p, k in enumerate(r)]))
    fit = fit_bradley_terry(items, comparisons) if items else None
    source = ctx.campaign.stage(stage.source) if stage.source else ctx.campaign.stages[0]
    likert = {r["item"]: r for r in compute_scores(ctx.store, ctx.name, source.name, source.kind)}
    counts = {i: [0, 0] for i in items}
    for w, l in comparisons:
        counts[w][0] += 1
        counts[w][1] += 1
        counts[l][1] += 1
    rows = []
    for i in items:
        lk = likert.get(i, {})
        rows.append({"item": i, "score": round(fit.score(i), 6), "uncertainty": round(fit.stderr(i), 6),
                     "comparisons": counts[i][1], "wins": counts[i][0], "likert_score": lk.get("score"),
                     "likert_n": lk.get("n"), "likert_sd": lk.get("sd"), "text": lk.get("text", "")})
    rows.sort(key=lambda r: (-r["score"], r["item"]))
    # items the shortlist left out follow, by their Likert score, with no ranking-stage evidence
    rest = [r for k, r in sorted(likert.items(), key=lambda kv: (-kv[1]["score"], kv[0])) if k not in known]
    rows += [{"item": r["item"], "score": None, "uncertainty": None, "comparisons": 0, "wins": 0, "likert_score": r["score"],
              "likert_n": r["n"], "likert_sd": r["sd"], "text": r["text"]} for r in rest]
    for rank, r in enumerate(rows, start=1):
        r["rank"] = rank
        r["kept"] = rank <= stage.keep and r["score"] is not None
    return rows
