"""Gold nuggets (seed 002 §3.4): the spans that enough workers selected in the same HIT.

A span counts when at least `min_workers` distinct workers selected exactly it (optionally: when the
summed competence of those workers, e.g. from MACE, reaches a threshold instead); spans shorter than
`min_tokens` are dropped; of overlapping spans in one HIT, the longest is kept.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class SpanVote:
    hit: Hashable
    worker: Hashable
    start: int  # offsets within the HIT (any unit: tokens, characters), end exclusive
    end: int
    tokens: int  # length in tokens, for the minimum-length rule


@dataclass(frozen=True)
class GoldNugget:
    hit: Hashable
    start: int
    end: int
    workers: int
    weight: float
    sentence: Hashable = None  # where the span starts, when the votes said so (see gold_from_records)


def gold_nuggets(votes: Iterable[SpanVote], min_workers: int = 3, min_tokens: int = 3,
                 competence: Mapping[Hashable, float] | None = None, min_weight: float | None = None) -> list[GoldNugget]:
    """The gold set, sorted by HIT and position. With `competence` and `min_weight`, a span is kept when
    the competences of its distinct workers add up to `min_weight` (MACE-weighted) instead of by count."""
    by_span: dict[tuple, set] = defaultdict(set)
    length: dict[tuple, int] = {}
    for v in votes:
        key = (v.hit, v.start, v.end)
        by_span[key].add(v.worker)
        length[key] = max(length.get(key, 0), v.tokens)
    candidates = []
    for (hit, start, end), workers in by_span.items():
        if length[(hit, start, end)] < min_tokens:
            continue
        weight = sum((competence or {}).get(w, 0.0) for w in workers) if competence is not None else float(len(workers))
        ok = weight >= min_weight if (competence is not None and min_weight is not None) else len(workers) >= min_workers
        if ok:
            candidates.append(GoldNugget(hit=hit, start=start, end=end, workers=len(workers), weight=weight))
    kept: list[GoldNugget] = []
    by_hit: dict[Hashable, list[GoldNugget]] = defaultdict(list)
    for c in candidates:
        by_hit[c.hit].append(c)
    for hit in sorted(by_hit, key=repr):
        chosen: list[GoldNugget] = []
        for c in sorted(by_hit[hit], key=lambda c: (-(c.end - c.start), c.start)):
            if all(c.end <= o.start or o.end <= c.start for o in chosen):
                chosen.append(c)
        kept.extend(sorted(chosen, key=lambda c: c.start))
    return kept


SpanRecord = tuple[Hashable, Hashable, Hashable, int, int]  # (hit_id, worker_id, sentence_id, start_token, end_token)


def gold_from_records(records: Iterable[SpanRecord], min_workers: int = 3, min_tokens: int = 3,
                      competence: Mapping[Hashable, float] | None = None,
                      min_weight: float | None = None) -> list[GoldNugget]:
    """`gold_nuggets` over plain span records, the shape the nugget task and the data loaders produce.

    Token offsets are within the HIT with `end_token` exclusive, so a span's length in tokens is
    end - start and spans in different sentences of one HIT still compare for overlap; `sentence_id`
    (where the span starts) is carried through to the nugget.
    """
    records = list(records)
    sentence_of = {(r[0], r[3], r[4]): r[2] for r in records}
    votes = []
    for hit, worker, _sentence, start, end in records:
        if end <= start:
            raise ValueError(f"empty or reversed span {start}..{end} in HIT {hit!r}")
        votes.append(SpanVote(hit=hit, worker=worker, start=start, end=end, tokens=end - start))
    return [GoldNugget(hit=g.hit, start=g.start, end=g.end, workers=g.workers, weight=g.weight,
                       sentence=sentence_of[(g.hit, g.start, g.end)])
            for g in gold_nuggets(votes, min_workers, min_tokens, competence, min_weight)]
