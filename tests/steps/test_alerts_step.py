"""The daemon's `alerts` step keeps its campaign's Reader from pass to pass (in the step context), and
what the kept Reader reads equals what a Reader made for the pass reads."""

from __future__ import annotations

import dataclasses
import time

from campaign.readmodel.snapshot import Reader
from campaign.steps.collect import collect
from campaign.steps.control import ALERTS_READER, alerts
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending
from campaign.steps.review import review


def test_the_alerts_step_keeps_its_reader_and_reads_what_a_fresh_one_reads(harness, rate):
    h = harness(n_items=20)
    load_items(h.ctx)
    plan_stage(h.ctx, h.ctx.campaign.stages[0])
    post_pending(h.ctx)
    hits = sorted(h.hits(), key=lambda x: x.id)
    alerts(h.ctx)
    kept = h.ctx.cache[ALERTS_READER]
    assert isinstance(kept, Reader)
    for n, worker in enumerate(("AZULU0000001", "AALPHA000001", "AMIKE0000001")):
        for hit in hits[n:]:
            h.work(worker, hit.hit_id, rate(1 + n))
        collect(h.ctx, sweep=len(hits))
        if n:
            review(h.ctx)
        h.clock.advance(600)
        alerts(h.ctx)
        assert h.ctx.cache[ALERTS_READER] is kept  # the same Reader, pass after pass
        now = time.time()
        fresh = Reader(h.ctx.store, h.ctx.state_dir)
        assert [a.key for a in kept.alerts(h.ctx.name, now)] == [a.key for a in fresh.alerts(h.ctx.name, now)]
        a, b = kept._arrivals[h.ctx.name], fresh._arrivals[h.ctx.name]
        assert a.count == b.count == sum(len(hits) - i for i in range(n + 1))
        assert [sorted(x.tolist()) for x in a.arrays()] == [sorted(x.tolist()) for x in b.arrays()]
    restarted = dataclasses.replace(h.ctx, cache={})  # a restarted daemon, or a campaign taken over: a new Reader
    alerts(restarted)
    assert restarted.cache[ALERTS_READER] is not kept


def test_on_the_wall_clock_a_campaigns_alerts_are_looked_at_every_few_seconds_not_every_pass(harness, monkeypatch):
    import campaign.steps.alerts as alerts_module
    import campaign.steps.control as control

    h = harness(n_items=10)
    calls: list[float] = []
    now = [1000.0]
    monkeypatch.setattr(alerts_module, "raise_alerts", lambda *a, **k: calls.append(now[0]) or [])
    monkeypatch.setattr(control.time, "monotonic", lambda: now[0])
    for t in (1000.0, 1001.0, 1004.9):  # every pass: a virtual-time run, the tests (alerts_every 0)
        now[0] = t
        alerts(h.ctx)
    assert calls == [1000.0, 1001.0, 1004.9]
    calls.clear()
    paced = dataclasses.replace(h.ctx, cache={}, alerts_every=5.0)  # as the daemon sets it on the wall clock
    for t in (2000.0, 2001.0, 2004.9, 2005.0, 2007.0, 2010.5):
        now[0] = t
        alerts(paced)
    assert calls == [2000.0, 2005.0, 2010.5]
