"""The review policy: from evidence about workers to decisions, each with its reason and evidence.

Evidence comes in two kinds, and they are treated differently:

* **Absolute evidence** (failed at least three in four of two or more traps; constant answers over at
  least twice `min_shared` items; or poor agreement together with failed traps, i.e. two kinds of
  evidence at once): the labels are excluded whatever their number, because with 25% spammers a 5%
  cap would keep most of them in the scores. Work is *rejected* only when the evidence is of two kinds
  (no agreement with the rest *and* a failed trap or constant answers): a rejection hurts a worker's
  standing.
* **Correlation alone** (a worker's r with the mean of the others on shared items, below
  `spam_correlation` or `min_correlation`): relative evidence. These calls share one cap,
  `max_excluded_share` of all labels (seed 000: "the worst workers, at most 5% of all labels"),
  filled worst first (furthest below the crowd), and the work is always approved and paid. A task kind
  whose HITs carry no traps (nuggets) has no other evidence against random answers, so there
  (`low_agreement_absolute`) the same calls exclude without the cap; the work is still paid.

Correlation is relative because on a hard task the whole crowd agrees weakly (Snow et al. 2008's
"surprise" ratings: median worker-rest r 0.32). So a worker is called on correlation only when their r
also sits significantly below the crowd's median r on Fisher's z scale (atanh(r), SE 1/sqrt(n - 3)
over their n shared items): at least `significance_se` SEs and, when correlation is the only evidence,
Bonferroni over all the workers tested (`familywise_alpha`), since every worker is tested and a 2-SE
rule calls about one honest worker in 40 by chance. On Snow et al.'s affect ratings (38 workers, most with 20 headlines) uncapped correlation
calls excluded 6-14% of the labels and made Pearson with the gold worse on disgust, fear and surprise
(issue 16); `campaign bench quality --real` measures the policy there.

Everything else is kept. Bonuses (if the spec sets an amount) go to workers with strong agreement over
enough items and no failed trap.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from campaign.quality.evidence import Label, TrapResult, WorkerEvidence, gather

REJECT_FEEDBACK = (
    "Thank you for your work. We could not accept this assignment: {why}. The task asks for a careful "
    "judgment of each statement; if you believe this is a mistake, please contact us."
)


@dataclass(frozen=True)
class PolicyConfig:
    min_shared: int = 5
    min_correlation: float = 0.2
    spam_correlation: float = 0.1
    max_excluded_share: float = 0.05
    reject_spam: bool = True
    block: bool = False
    bonus: Decimal | None = None
    bonus_correlation: float = 0.7
    significance_se: float = 2.0  # how far below the crowd's median r (in Fisher-z SEs) counts as evidence, at least
    familywise_alpha: float | None = 0.05  # and at most this chance of one honest worker in the crowd called by luck
    # correlation calls exclude without the `max_excluded_share` cap (still approved and paid): for task
    # kinds whose HITs carry no traps, where agreement is the only evidence against random answers and a
    # quarter of a crowd answering at random would otherwise stay in the scores
    low_agreement_absolute: bool = False

    @classmethod
    def from_spec(cls, q: Any) -> PolicyConfig:
        """From `campaign.spec.QualityPolicy`."""
        return cls(min_shared=q.min_shared, min_correlation=q.min_correlation, max_excluded_share=q.max_excluded_share,
                   reject_spam=q.reject_spam, block=q.block, bonus=Decimal(q.bonus) if q.bonus else None)


@dataclass(frozen=True)
class Decision:
    kind: str  # exclude | reject | block | bonus
    worker: str
    reason: str
    evidence: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class ReviewResult:
    evidence: Mapping[str, WorkerEvidence]  # a dict from the policy; an `EvidenceTable` when read back from the store
    decisions: list[Decision]

    def workers(self, kind: str) -> set[str]:
        return {d.worker for d in self.decisions if d.kind == kind}

    @property
    def excluded(self) -> set[str]:
        return self.workers("exclude")

    def reason(self, worker: str) -> str | None:
        return self.reasons().get(worker)

    def reasons(self) -> dict[str, str]:
        """Every decided worker's reasons, each once, in the order of the decisions (one pass over them)."""
        found: dict[str, dict[str, None]] = {}
        for d in self.decisions:
            found.setdefault(d.worker, {})[d.reason] = None
        return {w: "; ".join(rs) for w, rs in found.items()}


def below_median_se(e: WorkerEvidence, median: float | None) -> float:
    """How many standard errors (Fisher z) the worker's r sits below the crowd median; 0 when unknown."""
    if e.correlation is None or median is None or e.shared_items <= 3:
        return 0.0
    z = lambda r: math.atanh(max(-0.999, min(0.999, r)))  # noqa: E731
    return (z(median) - z(e.correlation)) * math.sqrt(e.shared_items - 3)


def reference_median(ev: Mapping[str, WorkerEvidence], config: PolicyConfig) -> float | None:
    """The crowd's median r, the yardstick of honest agreement, over the workers not already shown to be
    spam by evidence that does not depend on agreement (constant answers, failed check statements).

    Those workers' r is 0 or near it by construction, so counting them pulls the yardstick down: on the
    hostile bench's Prolific Likert stage (12 workers, 3 of them constant answerers) the median fell to
    0.50, and a random answerer at r 0.12 over 25 items sat only 1.9 SE below it and kept its ratings in
    the scores. All workers' r when every one of them is such spam."""
    honest = [e.correlation for e in ev.values() if e.correlation is not None and not _independent_spam(e, config)]
    every = [e.correlation for e in ev.values() if e.correlation is not None]
    pool = honest or every
    return statistics.median(pool) if pool else None


def _independent_spam(e: WorkerEvidence, c: PolicyConfig) -> bool:
    """Spam by the two kinds of evidence that `_spam_reasons` counts whatever the worker's agreement."""
    return _failed_checks(e) or _constant_over_enough(e, c)


def _failed_checks(e: WorkerEvidence) -> bool:
    """Failed at least three in four of two or more check statements."""
    return e.traps_seen >= 2 and e.traps_passed <= 0.25 * e.traps_seen


def _enough_shared(e: WorkerEvidence, c: PolicyConfig) -> bool:
    return e.shared_items >= 2 * c.min_shared


def _constant_over_enough(e: WorkerEvidence, c: PolicyConfig) -> bool:
    """The same answer over enough shared items to mean something."""
    return e.constant and _enough_shared(e, c)


def needed_se(config: PolicyConfig, tested: int) -> float:
    """SEs below the crowd's median r that count as evidence when `tested` workers are judged at once.

    Every worker is tested, so a fixed 2 SE (one-sided 2.3%) calls about one honest worker in 40 by
    chance: on Snow et al.'s affect ratings (38 workers, most with 20 headlines) such calls made the
    scores worse. Bonferroni over the tested workers keeps the chance of any false call at
    `familywise_alpha` (38 workers: 3.0 SE); a random answerer against a crowd at r 0.7 sits 6 SE below
    over 50 items, so real spam is still found.
    """
    if config.familywise_alpha is None or tested <= 1:
        return config.significance_se
    p = 1.0 - config.familywise_alpha / tested
    if p <= 0.0:  # an alpha of 1 or more over so few workers: no stricter than the plain rule
        return config.significance_se
    # the normal quantile (the standard library's, so a daemon that reviews needs no SciPy: 0.1 s less at
    # every start); it agrees with scipy.special.ndtri to about 1e-15
    return max(config.significance_se, statistics.NormalDist().inv_cdf(min(p, math.nextafter(1.0, 0.0))))


def _spam_reasons(e: WorkerEvidence, c: PolicyConfig, median: float | None, gap: float,
                  needed: float) -> tuple[list[str], bool, bool]:
    """Why a worker is clear spam (empty if not); whether the evidence is absolute (traps, constant answers,
    or two kinds at once), which excludes beyond the cap; and whether it is strong enough to reject.
    `gap`: how many SEs the worker's r sits below the crowd `median` (see `below_median_se`); `needed`:
    the gap that counts on correlation alone (`needed_se`). With a failed trap or constant answers beside
    it, `significance_se` is enough: that evidence is independent of the correlation test."""
    why = []
    absolute = False
    failed_traps = e.traps_seen - e.traps_passed
    if _failed_checks(e):
        why.append(f"failed {failed_traps} of {e.traps_seen} check statements")
        absolute = True
    enough = _enough_shared(e, c)
    corroborated = failed_traps >= 1 or e.constant
    disagree = (enough and e.correlation is not None and e.correlation < c.spam_correlation
                and gap >= (c.significance_se if corroborated else needed))
    if disagree:
        why.append(f"ratings unrelated to other workers' (r={e.correlation:.2f} over {e.shared_items} items, "
                   f"{gap:.1f} SE below the crowd's median r={median:.2f})")
        absolute = absolute or corroborated
    elif (enough and e.correlation is not None and e.correlation < c.min_correlation and failed_traps >= 1
          and e.traps_passed < 0.5 * e.traps_seen):
        why.append(f"weak agreement (r={e.correlation:.2f}) and failed {failed_traps} of {e.traps_seen} check statements")
        absolute = True
    if _constant_over_enough(e, c):
        why.append(f"the same answer for all {e.labels} statements")
        absolute = True
    strong = disagree and (failed_traps >= 1 or e.constant)
    return why, absolute, strong


def review(labels: Sequence[Label], traps: Sequence[TrapResult], config: PolicyConfig,
           competence: Mapping[str, float] | None = None) -> ReviewResult:
    """Decide, for every worker, from all labels so far. Deterministic: ties broken by worker id."""
    return judge(gather(labels, traps, config.min_shared, competence), config)


def judge(ev: dict[str, WorkerEvidence], config: PolicyConfig) -> ReviewResult:
    """Decide, for every worker, from the evidence about all of them (`gather`, or kept up to date by
    `campaign.quality.running.RunningEvidence`)."""
    rs = [e.correlation for e in ev.values() if e.correlation is not None]
    median = reference_median(ev, config)
    gap = {w: below_median_se(e, median) for w, e in ev.items()}
    needed = needed_se(config, len(rs))

    def facts(e: WorkerEvidence) -> dict[str, Any]:
        return {**e.as_dict(), "crowd_median_r": None if median is None else round(median, 4),
                "se_below_median": round(gap[e.worker], 2)}

    decisions: list[Decision] = []
    spam: set[str] = set()
    relative: list[tuple[WorkerEvidence, str]] = []  # correlation-only calls: they share the cap
    for w, e in ev.items():
        why, absolute, strong = _spam_reasons(e, config, median, gap[w], needed)
        if not why:
            continue
        reason = "; ".join(why)
        if not absolute:
            relative.append((e, reason))
            continue
        spam.add(w)
        decisions.append(Decision("exclude", w, reason, facts(e)))
        if config.reject_spam and strong:
            decisions.append(Decision("reject", w, reason, facts(e)))
        if config.block and strong:
            decisions.append(Decision("block", w, reason, facts(e)))
    called = {e.worker for e, _ in relative}
    for w, e in ev.items():
        if (w not in spam and w not in called and e.correlation is not None and e.correlation < config.min_correlation
                and gap[w] >= needed):
            relative.append((e, f"low agreement with other workers (r={e.correlation:.2f} over "
                                f"{e.shared_items} items, crowd median r={median:.2f})"))
    total = sum(e.labels for e in ev.values())
    room = total if config.low_agreement_absolute else int(config.max_excluded_share * total)
    used = 0
    for e, reason in sorted(relative, key=lambda x: (-gap[x[0].worker], x[0].worker)):
        if used + e.labels > room:
            continue  # a smaller, slightly better worker may still fit under the cap
        used += e.labels
        decisions.append(Decision("exclude", e.worker, reason, facts(e)))
    if config.bonus is not None:
        for w, e in ev.items():
            if (w not in spam and e.correlation is not None and e.correlation >= config.bonus_correlation
                    and e.shared_items >= 2 * config.min_shared and e.traps_seen == e.traps_passed):
                decisions.append(Decision("bonus", w, f"consistently good work (r={e.correlation:.2f})", facts(e)))
    return ReviewResult(evidence=ev, decisions=decisions)


def carried_exclusions(order: Sequence[str], excluded: Mapping[str, Set[str]]) -> dict[str, set[str]]:
    """Per stage of `order` (a campaign's stages): the workers whose labels are left out of it, those any
    stage's review excluded (`excluded[stage]`).

    A worker found answering at random (or not reading) in one stage is not trusted in the others. A
    later stage sees fewer of their labels (a ranking HIT is five items, a few HITs per worker), so its
    own evidence often cannot tell: on the hostile bench, constant spammers the Likert stage excluded kept
    their orders in the ranking (the shown order, which correlates with nothing). The other way round, a
    `fast` adversary whose random Likert ratings passed (r=0.16 over 25 items, 0.9 SE below the crowd's
    median) failed two of three check statements in the ranking. An earlier stage's final scores
    follow; what a later stage took from it when it started (a ranking's shortlist) does not change."""
    everyone: set[str] = set().union(*(set(excluded.get(stage, ())) for stage in order)) if order else set()
    return {stage: set(everyone) for stage in order}


def feedback(reason: str) -> str:
    return REJECT_FEEDBACK.format(why=reason)
