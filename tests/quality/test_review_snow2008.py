"""The review policy on real MTurk ratings: Snow et al. 2008's affect data (100 headlines x 10 workers,
0-100 scale). On "surprise" the whole crowd agrees weakly, which a fixed correlation threshold mistakes
for spam; the Fisher-z safeguard must not, and must still catch workers who answer at random."""

import csv

import numpy as np
import pytest

from campaign.paths import shared_data_dir
from campaign.quality.evidence import Label, TrapResult
from campaign.quality.review import PolicyConfig, review

pytestmark = [pytest.mark.shared_data, pytest.mark.skipif(
    shared_data_dir() is None or not (shared_data_dir() / "snow2008" / "standardized").is_dir(),
    reason="needs ../shared/data/snow2008 (real crowd data), absent on a fresh clone")]


def affect(emotion: str) -> list[Label]:
    path = shared_data_dir() / "snow2008" / "standardized" / f"{emotion}.standardized.tsv"
    with open(path, encoding="utf-8", newline="") as fh:
        return [Label(item=r["orig_id"], worker=r["!amt_worker_ids"], assignment=r["!amt_annotation_ids"],
                      value=float(r["response"])) for r in csv.DictReader(fh, delimiter="\t")]


def excluded_share(labels: list[Label], config: PolicyConfig) -> float:
    out = review(labels, [], config).excluded
    return sum(1 for l in labels if l.worker in out) / len(labels)


def test_weak_crowd_agreement_is_not_taken_for_spam():
    labels = affect("surprise")
    plain = excluded_share(labels, PolicyConfig(significance_se=0.0, familywise_alpha=None, max_excluded_share=1.0))
    assert plain > 0.30  # a fixed threshold, uncapped, leaves out over a third of the labels (measured: 38%)
    # Three workers sit 2.2-2.3 SE below the crowd's median r (0.32) over 20 headlines: by chance in a crowd
    # of 38 (Bonferroni asks for 3.0 SE). Leaving two of them out cost 0.025 of Pearson with the gold.
    assert excluded_share(labels, PolicyConfig()) == 0.0


def test_correlation_only_calls_stay_inside_the_cap_on_every_task():
    """No traps on real ratings, so every call is on correlation alone, except constant answers."""
    for emotion in ("anger", "disgust", "fear", "joy", "sadness", "surprise", "valence"):
        labels = affect(emotion)
        res = review(labels, [], PolicyConfig())
        relative = {w for w in res.excluded if not res.evidence[w].constant}
        assert sum(1 for l in labels if l.worker in relative) <= 0.05 * len(labels), emotion


def test_random_workers_added_to_real_ratings_are_excluded_worst_first_and_beyond_the_cap_with_traps():
    """Three workers answering at random on 50 headlines each, added to the real "sadness" crowd (median
    r 0.72), over 10 draws. On correlation alone the 5% cap (57 of 1,150 labels) holds one of them, the
    one furthest below the crowd; with two failed traps each (absolute evidence) all three go, and
    are rejected only when their r is also below `spam_correlation`."""
    base = affect("sadness")
    items = sorted({l.item for l in base})
    caught = caught_with_traps = 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        labels = list(base)
        bots = [f"BOT{k}" for k in range(3)]
        for b in bots:
            for it in rng.choice(items, size=50, replace=False):
                labels.append(Label(item=str(it), worker=b, assignment=f"{b}-{it}", value=float(rng.integers(0, 101))))
        res = review(labels, [], PolicyConfig())
        out = set(bots) & res.excluded
        caught += len(out)
        assert not set(bots) & res.workers("reject")  # correlation alone is one kind of evidence: no rejection
        if out:
            worst = max(bots, key=lambda b: res.evidence[b].correlation is not None and -res.evidence[b].correlation)
            assert worst in out
        traps = [TrapResult(b, f"{b}-t{k}", f"trap:{k}", 90.0, passed=False) for b in bots for k in range(2)]
        with_traps = review(labels, traps, PolicyConfig())
        caught_with_traps += len(set(bots) & with_traps.excluded)
    assert 8 <= caught <= 12
    assert caught_with_traps == 30
