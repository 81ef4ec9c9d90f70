"""Nugget quality control on real crowd data (seed 002's, ../shared/data/hiersumm-amt): which workers
the review policy excludes by their span boundaries (`campaign.tasks.nuggets.boundary_labels`), and
what that does to the gold nuggets and their exact match with the published gold, against keeping
everyone. Workers who marked nothing in a HIT left no row, so only workers with a span are judged.

    CAMPAIGN_SHARED_DATA=/path/to/shared/data python benchmarks/nugget_quality_real.py   (~5 min)
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import cast

from campaign.aggregate.gold_nuggets import SpanVote, gold_nuggets
from campaign.datasets import hiersumm
from campaign.quality.review import PolicyConfig, judge
from campaign.quality.running import RunningEvidence
from campaign.tasks.nuggets import boundary_labels


def gold_figures(data: dict, excluded: set[str]) -> tuple[int, float]:
    n_gold = matched = total = 0
    for topic, (hits, spans, _) in data.items():
        votes = [SpanVote(hit=s.hit, worker=s.worker, start=s.char_start, end=s.char_end, tokens=s.ptb_tokens)
                 for s in spans if s.worker not in excluded]
        gold = gold_nuggets(votes, min_workers=3, min_tokens=3)
        n_gold += len(gold)
        ours = {hits[cast(int, g.hit)].norm_text[g.start:g.end] for g in gold}
        published = [hiersumm.norm(x) for x in hiersumm.published_gold(topic)]
        total += len(published)
        matched += sum(1 for p in published if p in ours)
    return n_gold, matched / total


def main() -> None:
    t0 = time.time()
    data = {t: hiersumm.load_topic(t) for t in hiersumm.topics()}
    book = RunningEvidence()
    for topic, (hits, spans, _) in data.items():
        by: dict[tuple[int, str], list[tuple[int, int]]] = defaultdict(list)
        for s in spans:
            by[(s.hit, s.worker)].append((s.first, s.last))
        book.add([lab for (h, w), sp in by.items()
                  for lab in boundary_labels(f"{topic}/{h}", w, f"{topic}/{h}/{w}", sp, len(hits[h].tokens))])
    ev = book.evidence(5)
    total = sum(e.labels for e in ev.values())
    print(f"{len(ev)} workers, {total} labels ({time.time() - t0:.0f} s)")
    n, rate = gold_figures(data, set())
    print(f"keep everyone: gold {n}, exact match with the published gold {rate:.4f}")
    for absolute in (False, True):
        excluded = judge(ev, PolicyConfig(low_agreement_absolute=absolute)).excluded
        n, rate = gold_figures(data, excluded)
        share = sum(ev[w].labels for w in excluded) / total
        print(f"{'uncapped' if absolute else 'capped'}: {len(excluded)} workers excluded ({share:.1%} of the labels); "
              f"gold {n}, exact match {rate:.4f}")


if __name__ == "__main__":
    main()
