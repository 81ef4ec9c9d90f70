"""How much of a campaign's gold nuggets a system summary or extract covers (token overlap).

The seeds give no formula for this (seed 002 builds the nuggets, not a measure over them); the measure
follows the pyramid/nugget idea that a summary earns what the crowd agreed matters, weighted by support:

- Text is compared as sets of lower-cased alphanumeric tokens with common function words removed (a
  nugget made only of function words keeps them all), so "the", "of" scattered over a summary do not
  count as covering anything.
- The system text is read as units, one per non-empty line: an extract is one sentence per line
  already, and a free summary should be sentence-split first (splitting here at ". " would cut the
  corpus's own sentences at "U.S. " or "e.g. " and lose nuggets that span the cut). A nugget's coverage
  c(n) is the largest share of its tokens found in one unit: a nugget is a single fact, so it should be
  stated in one place, not assembled from words spread over the summary.
- A nugget is matched when c(n) >= `threshold` (default 0.5). With w(n) its support (the number of
  workers who selected it exactly; or its summed MACE competence, `weight="mace"`):
  recall = Σ_matched w / Σ w; recall_unweighted = matched / |N|; coverage = Σ w c(n) / Σ w (partial
  credit, no threshold); precision = share of system units that match at least one gold nugget;
  f1 = 2 P R / (P + R) with the weighted recall.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both but
by can could did do does doing down during each few for from further had has have having he her here hers herself
him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or
other our ours ourselves out over own same she should so some such than that the their theirs them themselves then
there these they this those through to too under until up very was we were what when where which while who whom why
will with would you your yours yourself yourselves s t
""".split())

_TOKEN = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class GoldNugget:
    """One line of gold_nuggets.jsonl (campaign.steps.nugget_export)."""

    hit: str
    item: str
    first: int
    last: int
    workers: int
    mace_weight: float
    text: str


@dataclass(frozen=True)
class NuggetMatch:
    nugget: GoldNugget
    coverage: float  # c(n)
    unit: int  # index of the best unit, -1 if none shares a token
    matched: bool


@dataclass(frozen=True)
class NuggetScores:
    precision: float
    recall: float
    recall_unweighted: float
    coverage: float
    f1: float
    n_nuggets: int
    n_matched: int
    n_units: int
    n_units_matching: int
    threshold: float
    weight: str
    matches: tuple[NuggetMatch, ...]

    def as_dict(self) -> dict[str, object]:
        return {"precision": self.precision, "recall": self.recall, "recall_unweighted": self.recall_unweighted,
                "coverage": self.coverage, "f1": self.f1, "n_nuggets": self.n_nuggets, "n_matched": self.n_matched,
                "n_units": self.n_units, "n_units_matching": self.n_units_matching, "threshold": self.threshold,
                "weight": self.weight,
                "nuggets": [{"hit": m.nugget.hit, "item": m.nugget.item, "first": m.nugget.first, "last": m.nugget.last,
                             "support": _support(m.nugget, self.weight), "coverage": m.coverage, "matched": m.matched,
                             "unit": m.unit} for m in self.matches]}


def tokens(text: str) -> frozenset[str]:
    words = _TOKEN.findall(text.lower())
    content = frozenset(w for w in words if w not in STOPWORDS)
    return content or frozenset(words)


def units(text: str) -> list[str]:
    """The system text's units: its non-empty lines."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def _support(n: GoldNugget, weight: str) -> float:
    return float(n.workers) if weight == "workers" else n.mace_weight


def score_nuggets(gold: Sequence[GoldNugget], system_units: Sequence[str], threshold: float = 0.5,
                  weight: str = "workers") -> NuggetScores:
    if weight not in ("workers", "mace"):
        raise ValueError("weight must be 'workers' or 'mace'")
    if not 0 < threshold <= 1:
        raise ValueError("threshold must be in (0, 1]")
    if not gold:
        raise ValueError("the gold holds no nugget")
    unit_tokens = [tokens(u) for u in system_units]
    matches = []
    unit_hit = [False] * len(unit_tokens)
    for n in gold:
        t = tokens(n.text)
        best, at = 0.0, -1
        for k, ut in enumerate(unit_tokens):
            share = len(t & ut) / len(t) if t else 0.0
            if share >= threshold:
                unit_hit[k] = True
            if share > best:
                best, at = share, k
        matches.append(NuggetMatch(nugget=n, coverage=best, unit=at, matched=best >= threshold))
    total = sum(_support(n, weight) for n in gold)
    if total <= 0:
        raise ValueError(f"the gold nuggets' {weight} weights sum to {total}")
    recall = sum(_support(m.nugget, weight) for m in matches if m.matched) / total
    coverage = sum(_support(m.nugget, weight) * m.coverage for m in matches) / total
    n_matched = sum(m.matched for m in matches)
    precision = sum(unit_hit) / len(unit_hit) if unit_hit else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return NuggetScores(precision=precision, recall=recall, recall_unweighted=n_matched / len(gold), coverage=coverage,
                        f1=f1, n_nuggets=len(gold), n_matched=n_matched, n_units=len(unit_tokens),
                        n_units_matching=sum(unit_hit), threshold=threshold, weight=weight, matches=tuple(matches))
