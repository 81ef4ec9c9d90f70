"""`campaign bench prior`: does adding a source stage's evidence to a ranking's comparisons
(`campaign.aggregate.source_prior`) hold on real crowd data?

UKPConvArg1 has no Likert stage, but it has 16k real pairwise judgements of 1,052 arguments in 32
topics, with a published ranking. Per topic and draw, two disjoint random shares of the judgements
stand for the two stages: share B is the ranking stage's comparisons (Bradley-Terry, as the export fits
them), share A a separate earlier measurement of the same arguments (its own Bradley-Terry scores and
standard errors, in the role of the Likert means). Spearman with the published ranking of:

- `B alone`: the comparisons only (what the export's `score` was before);
- `B + A`: `source_prior.combine` of B with A;
- `A ∪ B pooled`: one fit of both shares' judgements, the yardstick for combining two measurements;
- `B + shuffled A`: A's scores dealt to the wrong arguments, a source that predicts nothing
  (the combination must then cost next to nothing);
- `majority wins` of B: the simplest baseline (wins minus losses).

    campaign bench prior [--share 0.15] [--draws 5] [--json]

(tests/aggregate/test_source_prior.py runs it on CI, where the data is present.)

Needs ../shared/data/ukpconvarg1 (or CAMPAIGN_SHARED_DATA); says so and exits 2 without it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import numpy as np
from scipy.stats import spearmanr

from campaign.aggregate.bradley_terry import fit_bradley_terry
from campaign.aggregate.source_prior import combine
from campaign.bench.ranking import ukp_comparisons, ukpconvarg1_topics

METHODS = ("B alone", "B + A", "A ∪ B pooled", "B + shuffled A", "majority wins")


def one(items: Sequence[str], rows: Sequence[tuple[str, str, str]], published: dict[str, float], share: float,
        rng: np.random.Generator) -> dict[str, float]:
    order = rng.permutation(len(rows))
    k = max(1, int(round(share * len(rows))))
    a_rows = [rows[i] for i in order[:k]]
    b_rows = [rows[i] for i in order[k:2 * k]]
    truth = [-published[i] for i in items]  # the published score is larger for less convincing arguments
    fa = fit_bradley_terry(list(items), ukp_comparisons(a_rows))
    fb = fit_bradley_terry(list(items), ukp_comparisons(b_rows))
    fab = fit_bradley_terry(list(items), ukp_comparisons(a_rows + b_rows))
    b = {i: (fb.score(i), fb.stderr(i)) for i in items}
    a = {i: (fa.score(i), fa.stderr(i)) for i in items}
    dealt = list(rng.permutation(list(items)))
    shuffled = {i: a[j] for i, j in zip(items, dealt)}
    wins = dict.fromkeys(items, 0.0)
    for w, lo, weight in ukp_comparisons(b_rows):
        wins[w] += weight
        wins[lo] -= weight

    def rho(scores: dict[str, float]) -> float:
        return float(spearmanr([scores[i] for i in items], truth)[0])

    return {"B alone": rho({i: v[0] for i, v in b.items()}), "B + A": rho(combine(b, a).scores),
            "A ∪ B pooled": rho({i: fab.score(i) for i in items}), "B + shuffled A": rho(combine(b, shuffled).scores),
            "majority wins": rho(wins)}


def run(share: float, draws: int) -> dict[str, object] | None:
    data = ukpconvarg1_topics()
    if data is None:
        return None
    per: dict[str, list[float]] = {m: [] for m in METHODS}
    for n, (items, rows, published) in enumerate(data.values()):
        for d in range(draws):
            got = one(items, rows, published, share, np.random.default_rng(1000 * n + d))
            for m in METHODS:
                per[m].append(got[m])
    base = np.array(per["B alone"])
    out: dict[str, object] = {"topics": len(data), "draws": draws, "share": share, "methods": {}}
    for m in METHODS:
        v = np.array(per[m])
        diff = v - base
        out["methods"][m] = {"spearman": round(float(v.mean()), 4),  # type: ignore[index]
                             "minus_B_alone": round(float(diff.mean()), 4),
                             "se": round(float(diff.std(ddof=1) / np.sqrt(len(diff))), 4)}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="campaign bench prior", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--share", type=float, default=0.15, help="share of a topic's judgements in each of A and B")
    ap.add_argument("--draws", type=int, default=5, help="random splits per topic")
    ap.add_argument("--json", action="store_true", help="print exactly one JSON object")
    args = ap.parse_args(argv)
    got = run(args.share, args.draws)
    if got is None:
        print("campaign bench prior: needs ../shared/data/ukpconvarg1 (real crowd data), which is absent here "
              "(set CAMPAIGN_SHARED_DATA)", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(got, indent=2, ensure_ascii=False))
        return 0
    print(f"UKPConvArg1, {got['topics']} topics x {got['draws']} draws, A and B each {got['share']:.0%} of a topic's judgements")
    print(f"{'method':<16} {'Spearman':>9} {'vs B alone':>11} {'SE':>7}")
    for m, v in got["methods"].items():  # type: ignore[attr-defined]
        print(f"{m:<16} {v['spearman']:>9.4f} {v['minus_B_alone']:>+11.4f} {v['se']:>7.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
