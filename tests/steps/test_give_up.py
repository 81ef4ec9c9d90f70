"""Work nobody may take any more (`UnservableWork`) is expired instead of waited for to the end of its
lifetime; its HIT then closes like any expired one."""

from __future__ import annotations

import dataclasses

import pytest
from sqlmodel import select

from campaign.market.worker_client import WorkerAPIError
from campaign.marketplaces.base import UnservableWork
from campaign.steps.collect import collect
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending
from campaign.steps.review import close_finished_hits, review
from campaign.steps.studies import give_up
from campaign.store import EventRow, HitRow


class NobodyFor:
    """The harness's marketplace, saying that the given HITs' free slots can reach nobody."""

    def __init__(self, inner: object, dead: list[str]) -> None:
        self._inner = inner
        self.dead = dead

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def unservable(self) -> list[str]:
        return list(self.dead)


def test_a_hit_nobody_may_take_is_expired_then_closed_with_the_answers_it_has(harness, rate):
    h = harness(n_items=10)
    load_items(h.ctx)
    plan_stage(h.ctx, h.ctx.campaign.stages[0])
    post_pending(h.ctx)
    first, other = sorted(h.hits(), key=lambda x: x.id)
    h.work("AWORKER0000000", first.hit_id, rate(3))  # one of its three slots answered
    collect(h.ctx)
    review(h.ctx)
    assert give_up(h.ctx) == 0  # the MTurk-style marketplace cannot tell: nothing is given up

    market = NobodyFor(h.ctx.market, [first.hit_id])
    assert isinstance(market, UnservableWork)
    ctx = dataclasses.replace(h.ctx, market=market)
    assert give_up(ctx) == 1
    assert give_up(ctx) == 0  # expired already
    with h.ctx.store.session() as s:
        rows = {r.hit_key: r for r in s.exec(select(HitRow).where(HitRow.campaign == h.ctx.name)).all()}
        kinds = [e.kind for e in s.exec(select(EventRow).where(EventRow.campaign == h.ctx.name)).all()]
    assert rows[first.hit_key].expires_at is not None and rows[first.hit_key].expires_at <= h.clock.now()
    assert rows[other.hit_key].expires_at is None or rows[other.hit_key].expires_at > h.clock.now()
    assert kinds.count("giving_up") == 1 and kinds.count("gave_up") == 1  # the intent, then the record
    h.workers.register("AWORKER0000001")
    with pytest.raises(WorkerAPIError):
        h.workers.accept("AWORKER0000001", first.hit_id)  # expired on the marketplace too
    close_finished_hits(ctx)
    with h.ctx.store.session() as s:
        assert s.exec(select(HitRow.status).where(HitRow.campaign == h.ctx.name, HitRow.hit_key == first.hit_key)).one() == "closed"
