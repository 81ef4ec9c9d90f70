"""Rejections within Prolific's rules: fair attention checks and exceptionally fast completion.

Prolific's researcher policy (`../shared/reference/prolific-api.md`, "Corrections"; the help centre's
attention-check policy) allows a submission to be rejected for failed *fair* attention checks, for
exceptionally fast completion, or for no work at all (NO_CODE, `campaign.prolific.verdict`), and not for
disagreeing with other participants. So on Prolific:

- a stage's trap sentences become attention checks that say, in the statement itself, which answer
  to give (`attention_text`): "rate this statement 1" on a Likert stage, "put this statement last" on a
  ranking stage. Their pass rule stays the stage's (`traps.max_rating`, `traps.tolerance`), which accepts
  the instructed answer and, leniently, one next to it;
- a submission is rejected (`FAILED_CHECK`) only when it failed at least `checks_needed` of its checks:
  two for a study estimated at 5 minutes or more, one for a shorter one (the policy's rule);
- a submission is exceptionally fast (`TOO_QUICKLY`) when it took less than `too_quick` (a share, the
  spec's `prolific.too_quick`, 0.2 by default) of the study's expected time: the lesser of the
  researcher's estimate and the median time the study's completed submissions took (so an estimate
  set too high cannot turn ordinary speed into a rejection, and a study whose participants all take
  about as long rejects nobody for speed);
- a participant quality control excludes on agreement alone is paid and left out of the scores.

Pure functions; `campaign.prolific.check_reader.store_checks` reads the answers of a submission's assignments from the
store (the I/O edge the Prolific adapter is given).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

FAILED_CHECK = "FAILED_CHECK"
TOO_QUICKLY = "TOO_QUICKLY"
LONG_STUDY_MINUTES = 5  # Prolific: studies of 5 minutes or more need two failed checks for a rejection
TOO_QUICK_DEFAULT = Decimal("0.2")
REJECTED_EVENT = "submission_rejected"  # an event per rejection: subject the submission, data {"category": ...}
MARK = "attention check"  # a trap text that already says this is taken as the researcher's own instruction

INSTRUCTIONS = {
    "likert": "This is an attention check: whatever the statement says, rate it 1 (Not at all important).",
    "ranking": "This is an attention check: whatever the statement says, put it last (least important).",
}


@dataclass(frozen=True)
class CheckCount:
    """A submission's attention checks: how many it was shown and how many it failed."""

    seen: int = 0
    failed: int = 0


def attention_text(kind: str, text: str) -> str:
    """What a trap sentence shows on Prolific: the sentence with the explicit instruction that makes it a
    fair attention check, in the statement itself (Prolific: the check tests attention to the question,
    not to instructions above it). A text that already names itself an attention check is kept as the
    researcher wrote it; a kind without an instruction keeps its text."""
    instruction = INSTRUCTIONS.get(kind)
    if instruction is None or MARK in text.lower():
        return text
    return f"{text} ({instruction})"


def checks_needed(estimated_minutes: int) -> int:
    """Failed attention checks that allow a rejection: two in a study of 5 minutes or more, one below."""
    return 2 if estimated_minutes >= LONG_STUDY_MINUTES else 1


def seconds_taken(started_at: object, completed_at: object) -> float | None:
    """A submission's time taken from Prolific's `started_at` / `completed_at` (ISO 8601 strings, or
    epoch seconds as older emulators gave them); None while not completed."""
    def when(v: object) -> float | None:
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
        if isinstance(v, str) and v:
            try:
                return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
            except ValueError:
                return None
        return None
    start, end = when(started_at), when(completed_at)
    return None if start is None or end is None else max(0.0, end - start)


def expected_seconds(estimated_minutes: int, completed: Iterable[float]) -> float:
    """The study's expected time: the lesser of the estimate and the median of its completed submissions."""
    times = list(completed)
    estimate = 60.0 * estimated_minutes
    return min(estimate, statistics.median(times)) if times else estimate


def too_quick(seconds: float | None, expected: float, share: Decimal | None) -> bool:
    """Exceptionally fast: under `share` of the expected time (never when `share` is 0 or None)."""
    return seconds is not None and bool(share) and seconds < float(share or 0) * expected


def duration_text(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60} min {s % 60} s" if s >= 60 else f"{s} s"


def _at_least(n: int, p: float, k: int) -> float:
    """P(Binomial(n, p) >= k)."""
    return 1.0 - sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(min(k, n + 1)))


def full_bundle_chance(items: int, per_hit: int, hits: int, bundle: int, seed: int = 0, trials: int = 400) -> float:
    """The chance that a participant can be given a whole bundle in a stage whose HITs share items: the
    task site never gives anyone two HITs with an item in common in a stage, so a ranking stage (its HITs
    drawn from a shortlist of `items`, `per_hit` each, `hits` in all) mostly ends bundles short, and a
    short one is returned and paid per task, never rejected. Estimated by drawing the HITs at random and
    taking them greedily, as the door does (seeded: the same answer every time)."""
    import random

    if hits < bundle or per_hit * bundle > items:
        return 0.0
    rng = random.Random(seed)
    full = 0
    for _ in range(trials):
        taken: set[int] = set()
        got = 0
        for _ in range(hits):
            hit = set(rng.sample(range(items), per_hit))
            if not hit & taken:
                taken |= hit
                got += 1
                if got >= bundle:
                    full += 1
                    break
    return full / trials


def failing_share(kinds: Mapping[str, int], bundle: int, trap_share: float, needed: int, random_fail: float,
                  constant_fail: float, constant_all: bool) -> float:
    """The expected share of a simulated crowd's submissions rejected for failed attention checks, for
    `campaign validate`'s expected spend: a bundle of `bundle` HITs, each carrying a check with probability
    `trap_share`; a random spammer fails each check with probability `random_fail`; a constant spammer
    with `constant_fail`, either every check at once (`constant_all`: a Likert constant outside the
    passing ratings) or each on its own (a ranking left as shown, the check wherever it landed); nobody
    else fails. `kinds`: workers per kind (their submissions in proportion)."""
    workers = sum(kinds.values())
    if workers <= 0:
        return 0.0
    random_p = _at_least(bundle, trap_share * random_fail, needed)
    constant_p = (constant_fail * _at_least(bundle, trap_share, needed) if constant_all
                  else _at_least(bundle, trap_share * constant_fail, needed))
    return (kinds.get("random_spammer", 0) * random_p + kinds.get("constant_spammer", 0) * constant_p) / workers
