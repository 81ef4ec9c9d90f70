"""Each daemon step run on its own, in-process: a store, an account on the built-in marketplace the
run shares (a manual clock), and workers driven by hand through the worker API (no simulated crowd, no
scheduler)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from campaign.clock import ManualClock
from campaign.crowd.forms import Form, parse_form
from campaign.daemon import ensure_campaign_row, tick
from campaign.market.worker_client import WorkerClient
from campaign.marketplaces.mturk import MTurkMarketplace
from campaign.spec import load_spec
from campaign.steps.context import Context
from campaign.store import AssignmentRow, CampaignRow, HitRow, JudgmentRow, Store
from tests.support.market import SharedMarket
from tests.support.specs import NO_CROWD, campaign, first_propositions, write_spec

LIKERT = {"kind": "likert", "items_per_hit": 5, "assignments": 3}
TWO_STAGE = [{"name": "likert", "kind": "likert", "assignments": 2},
             {"name": "ranking", "kind": "ranking", "source": "likert", "shortlist": 8, "keep": 4, "batch_pairs": 6,
              "pair_budget": 0.5, "assignments": 2}]


def steps_campaign(spec: str, props: Path) -> dict[str, Any]:
    """The "likert" (a single task) or "two-stage" campaign over `props`, no crowd: the tests are the workers."""
    if spec == "likert":
        return campaign("steps", task=LIKERT, budget="10.00",
                        propositions=props, crowd=NO_CROWD, poll_interval=None)
    return campaign("steps", stages=TWO_STAGE, budget="20.00", propositions=props, crowd=NO_CROWD, poll_interval=None)


@dataclass
class Harness:
    ctx: Context
    market: object
    workers: WorkerClient
    clock: ManualClock

    def hits(self, stage: str | None = None) -> list[HitRow]:
        with self.ctx.store.session() as s:
            q = select(HitRow).where(HitRow.campaign == self.ctx.name)
            rows = s.exec(q).all()
        return [h for h in rows if stage is None or h.stage == stage]

    def status(self) -> str:
        """The campaign's status in the store ("missing" before its row exists)."""
        with self.ctx.store.session() as s:
            row = s.get(CampaignRow, self.ctx.name)
            return row.status if row else "missing"

    def tick_until_finished(self, passes: int = 40) -> None:
        """Daemon passes, the clock a minute on after each unfinished one, until the campaign finishes or
        `passes` have run."""
        for _ in range(passes):
            tick(self.ctx)
            if self.status() == "finished":
                return
            self.clock.advance(60)

    def answer_all_reviewed(self, workers: int = 3) -> list[HitRow]:
        """The first stage planned and posted, every HIT answered by `workers` workers with varied ratings
        (constant ones would be excluded, for real), then collected, policed and reviewed: every answer
        approved and counted. Returns the HITs."""
        from campaign.steps.collect import collect
        from campaign.steps.plan import load_items, plan_stage
        from campaign.steps.post import post_pending
        from campaign.steps.quality_pass import quality_pass
        from campaign.steps.review import review

        load_items(self.ctx)
        plan_stage(self.ctx, self.ctx.campaign.stages[0])
        post_pending(self.ctx)
        hits = self.hits()

        def varied(form: Form) -> list[tuple[str, str]]:
            return [(sl.radio_name, str(1 + sl.index % 5)) for sl in form.slots if sl.radio_name]

        for hit in hits:
            assert hit.hit_id is not None
            for w in range(workers):
                self.work(f"AWORK{w:09d}", hit.hit_id, varied)
        collect(self.ctx)
        quality_pass(self.ctx)
        review(self.ctx)
        return hits

    def leave_out_first_answer(self, hit_key: str) -> None:
        """Quality control's verdict on the HIT's first answer, set by hand: its labels left out (it stays
        approved and paid), as for random work caught by agreement alone."""
        with self.ctx.store.session() as s:
            aid = s.exec(select(AssignmentRow.assignment_id).where(AssignmentRow.hit_key == hit_key)).first()
            for j in s.exec(select(JudgmentRow).where(JudgmentRow.assignment_id == aid)).all():
                j.excluded = True
                s.add(j)

    def work(self, worker: str, hit_id: str, answer: Callable[[Form], list[tuple[str, str]]]) -> str:
        """One worker accepts the HIT, reads its page and submits `answer(form)`; returns the assignment id."""
        self.workers.register(worker)
        aid = self.workers.accept(worker, hit_id)["AssignmentId"]
        form = parse_form(self.workers.task_html(aid))
        self.workers.submit(aid, [("assignmentId", aid)] + answer(form))
        return aid


def _rate(value: int) -> Callable[[Form], list[tuple[str, str]]]:
    return lambda form: [(s.radio_name, str(value)) for s in form.slots if s.radio_name]


@pytest.fixture
def rate() -> Callable[[int], Callable[[Form], list[tuple[str, str]]]]:
    """rate(v): an answer giving every item of a Likert page the rating v."""
    return _rate


@pytest.fixture
def harness(tmp_path: Path, shared_prod_market: SharedMarket) -> Iterator[Callable[..., Harness]]:
    """make(spec, n_items, seed): a harness on an account of its own on the run's shared marketplace
    (production mode, so money is checked); one a test."""
    with ExitStack() as stack:
        made: list[Store] = []

        def make(spec: str = "likert", n_items: int = 10, seed: int = 0) -> Harness:
            """A harness for the "likert" or "two-stage" spec above, over the first `n_items` demo statements."""
            assert not made, "one harness a test: the shared client signs as one account at a time"
            cfg = write_spec(tmp_path / "campaigns.yaml", steps_campaign(spec, first_propositions(tmp_path, n_items)))
            campaign = load_spec(cfg).campaigns[0]
            market, client = stack.enter_context(shared_prod_market.account())
            store = stack.enter_context(closing(Store.open(tmp_path / "state")))
            made.append(store)
            instance = ensure_campaign_row(store, campaign, seed)
            clock = shared_prod_market.clock
            ctx = Context(store=store, market=MTurkMarketplace(client), campaign=campaign, seed=seed,
                          state_dir=tmp_path / "state", clock=clock, instance=instance, lock=threading.Lock())
            return Harness(ctx=ctx, market=market, workers=WorkerClient(market.endpoint_url), clock=clock)

        yield make
