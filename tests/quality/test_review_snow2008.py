"""The review policy on real MTurk ratings: Snow et al. 2008's affect data (100 headlines x 10 workers,
0-100 scale). On "surprise" the whole crowd agrees weakly, which a fixed correlation threshold mistakes
for spam; the Fisher-z safeguard must not, and must still catch workers who answer at random."""

import csv

import numpy as np
import pytest

from campaign.paths import shared_data_dir
from campaign.quality.evidence import Label
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
    plain = excluded_share(labels, PolicyConfig(significance_se=0.0))
    guarded = excluded_share(labels, PolicyConfig())
    assert plain > 0.30  # a fixed threshold leaves out over a third of the labels (measured: 38%)
    # Measured: 14%, three workers: r -0.19 and -0.22 over 20 items, 0.07 over 100 (89 of their 100
    # answers are 0). All three are attentive on the same headlines' other emotions (r 0.3-0.84 on anger,
    # sadness, valence), so this 14% is still honest work lost: the bound records the safeguard's reach,
    # not a target. The 5% cap of seed 000 is not met on this task.
    assert guarded <= 0.15


def test_random_workers_added_to_real_ratings_are_excluded():
    """Three workers answering at random on 50 headlines each, added to the real "sadness" crowd (median
    r 0.72), over 10 draws. A random worker whose chance r lands above `spam_correlation` (0.1) can stay
    in when the 5% cap on weak workers is full; measured: 25 of 30 excluded."""
    base = affect("sadness")
    items = sorted({l.item for l in base})
    caught = 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        labels = list(base)
        bots = [f"BOT{k}" for k in range(3)]
        for b in bots:
            for it in rng.choice(items, size=50, replace=False):
                labels.append(Label(item=str(it), worker=b, assignment=f"{b}-{it}", value=float(rng.integers(0, 101))))
        res = review(labels, [], PolicyConfig())
        caught += len(set(bots) & res.excluded)
        assert not set(bots) & res.workers("reject")  # correlation alone is one kind of evidence: no rejection
    assert caught >= 24
