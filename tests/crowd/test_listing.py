"""Who lists the open HITs in a pass of `SimulatedCrowd` (`LIST_WINDOW`): a window of the present workers
that moves on each pass, and, in a virtual-time run's pass, everyone else when the window found nothing."""

from __future__ import annotations

from typing import Any

from campaign.clock import ManualClock
from campaign.crowd.models import SimWorker
from campaign.crowd.runner import LIST_WINDOW, SimulatedCrowd
from campaign.market.worker_client import WorkerAPIError
from campaign.tasks import likert
from campaign.tasks.base import ShownItem

TEXT = "Bottled water costs a thousand times more than tap water."
N = LIST_WINDOW * 2 + 50


class OneHitSite:
    """A worker site with one open HIT of one slot, listed for (and taken by) the workers in `sees` only."""

    def __init__(self, sees: set[str]) -> None:
        self.sees = sees
        self.listed_for: list[str] = []
        self.submitted: list[tuple[str, str]] = []  # (assignment, worker)
        self.open = True

    def register(self, *_: Any, **__: Any) -> None:
        pass

    def available(self, worker_id: str, max: int = 100) -> list[dict[str, Any]]:  # noqa: A002 - the client's name
        self.listed_for.append(worker_id)
        return [{"HITId": "H1", "CreationTime": 1}] if self.open and worker_id in self.sees else []

    def preview_html(self, worker_id: str, hit_id: str) -> str:
        return likert.page([ShownItem("k1", TEXT)], "Water", "Rate")

    def accept(self, worker_id: str, hit_id: str) -> dict[str, Any]:
        if worker_id not in self.sees:
            raise WorkerAPIError("DoesNotMeetRequirements", "not qualified")
        if not self.open:
            raise WorkerAPIError("NoAvailableSlot", "full")
        self.open = False
        self.worker = worker_id
        return {"AssignmentId": "A1"}

    def task_html(self, assignment_id: str) -> str:
        return self.preview_html(self.worker, "H1")

    def submit(self, assignment_id: str, fields: list[tuple[str, str]]) -> None:
        self.submitted.append((assignment_id, self.worker))


def _crowd(site: OneHitSite) -> SimulatedCrowd:
    workers = [SimWorker(f"AW{k:08d}", "diligent") for k in range(N)]  # all arrived at once (arrival 0)
    crowd = SimulatedCrowd("http://127.0.0.1:1", workers, {TEXT: 0.9}, seed=3, clock=ManualClock(), client=site)  # type: ignore[arg-type]
    crowd.prepare()
    return crowd


def test_a_wall_clock_pass_lists_a_window_of_workers_that_moves_on_each_pass() -> None:
    site = OneHitSite(sees=set())
    crowd = _crowd(site)
    ids = [w.worker_id for w in crowd.workers]
    try:
        for _ in range(3):
            assert crowd.step(exhaustive=False) == 0
    finally:
        crowd.stop()
    assert site.listed_for == ids[:LIST_WINDOW] + ids[LIST_WINDOW:2 * LIST_WINDOW] + ids[2 * LIST_WINDOW:] + ids[:LIST_WINDOW - 50]


def test_a_virtual_time_pass_finds_a_hit_only_a_worker_outside_the_window_sees() -> None:
    seer = f"AW{N - 1:08d}"  # the last worker: outside the first window
    site = OneHitSite(sees={seer})
    crowd = _crowd(site)
    try:
        assert crowd.step() == 1  # the window found nothing; the rest listed, and the one who sees it answered
    finally:
        crowd.stop()
    assert site.submitted == [("A1", seer)]
    assert len(site.listed_for) == N and len(set(site.listed_for)) == N


def test_a_crowd_no_larger_than_the_window_lists_everyone_every_pass() -> None:
    site = OneHitSite(sees=set())
    crowd = _crowd(site)
    crowd.workers = crowd.workers[:LIST_WINDOW]
    try:
        crowd.step(exhaustive=False)
        crowd.step(exhaustive=False)
    finally:
        crowd.stop()
    assert site.listed_for == [w.worker_id for w in crowd.workers] * 2
