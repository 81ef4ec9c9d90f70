"""The simulated crowds of `campaign run` in a child process of the daemon.

The daemon, the built-in marketplace and the crowd were one Python process, so one core did all three
under one GIL while the machine's other core idled; the crowd's part (rendering, parsing and answering
every HIT, four worker requests per assignment) was a sixth of that core. Here the crowd runs beside
the daemon as its own process, exactly as `campaign run` built it in-process: the same workers from
the same pool seeds, the same hidden truth, the same seed, each crowd working only its campaign's
HITs, and the same simulated clock (`ScaledClock.shared`: both processes read the machine's monotonic
clock, so they tell the same time). Which worker answers what never depended on timing, so a seed's
scores are the same byte for byte.

The child registers its workers through an operator working on the marketplace's state directory
(as `campaign crowd run` does), says `ready` on stdout, and works until SIGTERM. It dies with the
daemon (PR_SET_PDEATHSIG, and a check of its parent every half second): a crowd left behind by a
killed daemon must not work the HITs of the next one.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from campaign.child_process import begin, end, first_line, spawn, wait_for_stop
from campaign.clock import Clock
from campaign.spec import Campaign

log = logging.getLogger(__name__)

READY = "ready"
POLL = 0.05  # seconds between a crowd's passes when it found nothing to do


@dataclass(frozen=True)
class CrowdJob:
    """One campaign's crowd: its spec, the run's seed and the seed of its worker pool."""

    campaign: Campaign
    seed: int
    pool_seed: int


@dataclass(frozen=True)
class ChildConfig:
    endpoint: str  # the marketplace's URL (the daemon's built-in marketplace)
    market_state: Path  # the marketplace's state directory: its operator signs the workers up
    clock: dict[str, float] | None  # `ScaledClock.shared()`; None: the wall clock
    jobs: tuple[CrowdJob, ...]
    state_dir: Path  # the store, to tell a campaign's HITs from the others'
    db: str | None
    parent: int  # the daemon's pid


def hits_of(store: Any, name: str) -> Callable[[str], bool]:
    """Whether a marketplace HIT id is one of campaign `name`'s, from the store; an answer, once found,
    is kept. An id the store does not know yet (posted, not recorded yet) is asked again next time."""
    from sqlmodel import select

    from campaign.store import HitRow

    known: dict[str, bool] = {}
    lock = threading.Lock()

    def wants(hit_id: str) -> bool:
        with lock:
            if hit_id not in known:
                with store.session() as s:
                    camp = s.exec(select(HitRow.campaign).where(HitRow.hit_id == hit_id).limit(1)).first()
                if camp is None:
                    return False
                known[hit_id] = camp == name
            return known[hit_id]

    return wants


def build_crowd(job: CrowdJob, endpoint: str, clock: Clock, wants: Callable[[str], bool], client: Any = None) -> Any:
    """The crowd of one campaign: `crowd.workers` workers of the campaign's pool, working its HITs."""
    from campaign.crowd.adversaries import assign
    from campaign.crowd.models import make_pool
    from campaign.crowd.runner import SimulatedCrowd
    from campaign.inputs import load_items, load_truth

    c = job.campaign
    truth = load_truth(c.crowd.truth) if c.crowd.truth else {}
    by_text = {it.text: truth.get(it.key, 0.5) for it in load_items(c.input_kind, c.input_path)}
    workers = make_pool(c.crowd.workers, job.pool_seed, dict(c.crowd.mix), arrival_span=c.crowd.arrival_span)
    return SimulatedCrowd(endpoint, workers, by_text, seed=job.seed, clock=clock, poll=POLL, wants=wants, client=client,
                          adversaries=assign(workers, c.crowd.adversaries, job.pool_seed))


def child_can_run(campaign: Campaign) -> bool:
    """Whether a fresh interpreter knows everything this campaign's crowd needs: its stage types and
    task kinds come with the `campaign` package. A kind registered only in this process (a plugin, a
    test) is not known in a child, so that campaign's crowd stays in-process (`InProcessCrowds`)."""
    from campaign.tasks import get as get_kind

    for stage in campaign.stages:
        try:
            kind = get_kind(stage.kind)
        except KeyError:
            return False
        if not (type(stage).__module__.startswith("campaign.") and type(kind).__module__.startswith("campaign.")):
            return False
    return True


class InProcessCrowds:
    """The crowds of campaigns whose task kinds only this process knows, on threads here as they all
    used to be (same workers, seeds and clock as in a child)."""

    def __init__(self, jobs: tuple[CrowdJob, ...], endpoint: str, clock: Clock, store: Any, threads: bool = True,
                 app: Any = None) -> None:
        """Without `threads` the crowds only sign their workers up: a virtual-time run's timeline steps them.
        With `app` (the worker site's application in this process) they reach it without a socket."""
        from campaign.market.worker_client import WorkerClient
        from campaign.web.loopback import transport

        def client() -> Any:
            return WorkerClient(endpoint, transport=transport(app, endpoint)) if app is not None else None

        self.crowds = [build_crowd(job, endpoint, clock, hits_of(store, job.campaign.name), client=client()) for job in jobs]
        for crowd in self.crowds:
            if threads:
                crowd.start()
            else:
                crowd.prepare()

    def stop(self) -> None:
        for crowd in self.crowds:
            crowd.stop()


class CrowdProcess:
    """The daemon's handle on its crowds' child process; `stop()` ends it."""

    def __init__(self, config: ChildConfig, timeout: float = 120.0) -> None:
        self.proc = spawn("campaign.crowd.child", config)
        assert self.proc.stdout is not None
        line = first_line(self.proc.stdout, timeout)
        if line.strip() != READY:
            self.stop()
            raise RuntimeError(f"the simulated crowd's process did not start (exit {self.proc.returncode}); "
                               "its messages are above")

    def stop(self) -> None:
        end(self.proc)


def main() -> int:
    config: ChildConfig
    config, clock, done = begin("crowd")
    from campaign.market.operator import offline
    from campaign.market.worker_client import WorkerClient
    from campaign.store import Store

    store = Store.open(config.state_dir, config.db)
    operator, close_operator = offline(config.market_state)
    crowds = []
    try:
        for job in config.jobs:
            crowd = build_crowd(job, config.endpoint, clock, hits_of(store, job.campaign.name),
                                client=WorkerClient(config.endpoint, operator=operator))
            crowd.start()
            crowds.append(crowd)
        print(READY, flush=True)
        wait_for_stop(done, config.parent)
    finally:
        for crowd in crowds:
            crowd.stop()
        close_operator()
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
