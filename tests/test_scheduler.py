"""The daemon's scheduler gives every campaign its turn when it holds more campaigns than it has threads."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import UTC, datetime

import pytest

from campaign.daemon import make_scheduler

pytestmark = pytest.mark.slow  # 4 s of real time


def test_every_campaign_gets_its_passes_when_the_threads_are_behind() -> None:
    # 30 campaigns whose passes take 50 ms each on one thread: a round takes 1.5 s, longer than
    # APScheduler's default grace of 1 s, under which the campaigns queued last were dropped round
    # after round and some never passed at all (seen at 470,000 propositions with 20 campaigns a daemon)
    passes: Counter[int] = Counter()
    lock = threading.Lock()

    def campaign(k: int):
        def tick() -> None:
            with lock:
                passes[k] += 1
            time.sleep(0.05)
        return tick

    scheduler = make_scheduler(threads=1)
    for k in range(30):
        scheduler.add_job(campaign(k), "interval", seconds=0.1, id=f"tick:{k}", max_instances=1,
                          next_run_time=datetime.now(UTC))
    scheduler.start()
    try:
        time.sleep(4.0)
    finally:
        scheduler.shutdown(wait=False)
    assert set(passes) == set(range(30)), f"never passed: {sorted(set(range(30)) - set(passes))}"
    assert max(passes.values()) - min(passes.values()) <= 1, passes
