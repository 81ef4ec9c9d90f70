"""The daemon's pass over one campaign, declared in one place (`PIPELINE`).

Each step names the campaign statuses it runs in (`campaign.state`) and, if it works stage by stage,
which stages it takes (the ready ones: a stage is ready when the one before it is done). A step reads
what it needs from the store and writes its results there, so each can be run (and tested) on its own
against a store and a marketplace. The one thing steps share in memory is this daemon's `ctx.cache`:
collect and review note there that the crowd is ahead of them, and post waits for them (never state:
a restart starts from the store alone).

`PIPELINE`'s order is the order of one pass: heartbeat, adopt a new budget, load items, keep workers
excluded in a finished stage out of the later ones, plan (at once
or batch by batch), post and open study places, extend, finish interrupted posts and cancel, collect,
carry out the operator's decisions on held rows, review quality, block, decide on work, ask again for
refused answers, close HITs, settle studies, expire work nobody may take any more, pause after a pilot, release what a cancel closed, plan a stage's repeat, pay
bonuses, finish (or end out of money), raise alerts. A step that raises costs only itself
(`isolation.StepGuard`).
"""

from __future__ import annotations

import logging
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from campaign.spec import Stage
from campaign.state import ACTIVE, TICKED, CampaignStatus
from campaign.steps.batches import plan_next_batch
from campaign.steps.budget import exhaust_if_drained, sync_budget
from campaign.steps.collect import collect
from campaign.steps.context import Context
from campaign.steps.control import alerts, apply_cancel, apply_extend, heartbeat, post_interrupted
from campaign.steps.finish import finish_if_done
from campaign.steps.isolation import StepGuard
from campaign.steps.pilot import pilot_pause
from campaign.steps.plan import load_items, plan_stage
from campaign.steps.post import post_pending
from campaign.steps.quality_pass import blocks, bonuses, quality_pass
from campaign.steps.repeat import plan_repeat
from campaign.steps.replace import replace_refused
from campaign.steps.review import close_finished_hits, review
from campaign.steps.settle import settle_decisions
from campaign.steps.shut_out import shut_out
from campaign.steps.stages import ready_stages
from campaign.steps.studies import give_up, open_places, reconcile_costs, settle_studies
from campaign.tasks import get as get_kind

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class Step:
    name: str
    statuses: frozenset[str]  # campaign statuses the step runs in
    run: Callable[[Context], Any] | None = None  # once per pass
    run_stage: Callable[[Context, Stage], Any] | None = None  # once per ready stage (see `stages.ready_stages`)
    batch_planned: bool | None = None  # with run_stage: only stages whose kind is (True) / is not (False) batch-planned

    def __call__(self, ctx: Context, guard: StepGuard | None = None) -> None:
        """Run the step; with `guard`, a failure (of the whole step, or of one stage of a stage-wise
        step) is the guard's to record and back off, and the other stages still run."""
        if self.run is not None:
            run = self.run
            if guard is None:
                run(ctx)
            else:
                guard.run(self.name, lambda: run(ctx))
        if self.run_stage is not None:
            run_stage = self.run_stage
            for stage in ready_stages(ctx):
                if self.batch_planned is None or get_kind(stage.kind).batch_planned == self.batch_planned:
                    if guard is None:
                        run_stage(ctx, stage)
                    else:
                        guard.run(f"{self.name}:{stage.name}", lambda st=stage: run_stage(ctx, st))  # type: ignore[misc]


def _statuses(*names: str) -> frozenset[str]:
    return frozenset(names)


PIPELINE: tuple[Step, ...] = (
    Step("heartbeat", TICKED, run=heartbeat),
    Step("budget", TICKED, run=sync_budget),
    Step("load", ACTIVE, run=load_items),
    Step("shut-out", _statuses(CampaignStatus.RUNNING), run=shut_out),  # before a later stage's first HITs go up
    Step("plan", ACTIVE, run_stage=plan_stage, batch_planned=False),
    Step("batches", _statuses(CampaignStatus.RUNNING), run_stage=plan_next_batch, batch_planned=True),
    Step("post", _statuses(CampaignStatus.RUNNING), run=post_pending),
    Step("places", _statuses(CampaignStatus.RUNNING), run=open_places),  # marketplaces with studies (Prolific) only
    Step("extend", ACTIVE, run=apply_extend),
    Step("post-interrupted", _statuses(CampaignStatus.CANCELLING), run=post_interrupted),
    Step("cancel", _statuses(CampaignStatus.CANCELLING), run=apply_cancel),
    Step("collect", ACTIVE, run=collect),
    Step("decisions", TICKED, run=settle_decisions),  # the operator's decisions on held rows (`campaign decide`)
    Step("quality", ACTIVE, run=quality_pass),
    Step("blocks", _statuses(CampaignStatus.RUNNING, CampaignStatus.CANCELLING), run=blocks),
    Step("review", _statuses(CampaignStatus.RUNNING, CampaignStatus.CANCELLING), run=review),
    Step("replace", _statuses(CampaignStatus.RUNNING), run=replace_refused),  # before close: a HIT short of answers stays open
    Step("close", ACTIVE, run=close_finished_hits),
    Step("studies", ACTIVE, run=settle_studies),  # marketplaces with studies: decisions, charges, stopping
    Step("give-up", _statuses(CampaignStatus.RUNNING), run=give_up),  # work nobody may take any more: expired
    Step("pilot", _statuses(CampaignStatus.RUNNING), run=pilot_pause),  # prolific.pilot: pause once its places are decided
    Step("cancel-again", _statuses(CampaignStatus.CANCELLING), run=apply_cancel),  # HITs closed by this pass release their money now
    Step("repeat", _statuses(CampaignStatus.RUNNING), run_stage=plan_repeat),  # before finish: a stage's repeat keeps it open
    Step("bonuses", _statuses(CampaignStatus.RUNNING, CampaignStatus.PAUSED), run=bonuses),
    Step("costs", ACTIVE, run=reconcile_costs),  # marketplaces with studies: each finished study's ledger vs its charges
    Step("finish", _statuses(CampaignStatus.RUNNING, CampaignStatus.PAUSED), run=finish_if_done),
    Step("budget-exhausted", _statuses(CampaignStatus.RUNNING), run=exhaust_if_drained),
    Step("alerts", TICKED, run=alerts),
)


Durations: TypeAlias = "array[float]"


def durations() -> Durations:
    """A series of step or pass durations (ms) as 4-byte floats: a daemon keeps every one of its run."""
    return array("f")


def steps_for(status: str, pipeline: tuple[Step, ...] = PIPELINE) -> list[Step]:
    return [s for s in pipeline if status in s.statuses]


def run_pass(ctx: Context, status: str, pipeline: tuple[Step, ...] | None = None,
             step_ms: dict[str, Durations] | None = None) -> list[str]:
    """Run every step declared for `status`, in order; returns the names of the steps run. `step_ms`
    collects each step's duration, so a slow pass can be traced to the step that grew.

    A step that raises costs only itself: it is recorded once and backs off (`isolation.StepGuard`),
    and the rest of the pass runs; its rows are the step's own to isolate (`isolation.hold`)."""
    ran = []
    guard = StepGuard(ctx)
    StepGuard.next_pass(ctx)
    for step in steps_for(status, PIPELINE if pipeline is None else pipeline):
        log.debug("campaign %s: step %s", ctx.name, step.name)
        started = time.perf_counter()
        step(ctx, guard)
        if step_ms is not None:
            step_ms.setdefault(step.name, durations()).append((time.perf_counter() - started) * 1000)
        ran.append(step.name)
    return ran
