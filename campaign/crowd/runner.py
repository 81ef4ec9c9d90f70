"""The simulated crowd at work: workers who find HITs on the marketplace's worker interface, accept
them, read the HTML, answer from each item's hidden truth and post the form, as people in browsers do.

Same seed, same run: which worker takes which slot of a HIT is decided by a seeded order over workers
keyed by the HIT's content (not by timing), and each answer by a seed of (worker, HIT content). Workers
arrive over simulated time; a worker later in a HIT's order waits for its arrival rather than being
skipped, so the schedule of threads cannot change who answers what.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from campaign.clock import Clock
from campaign.crowd.adversary_site import SiteAdversaries
from campaign.crowd.forms import Form, norm_text, parse_form
from campaign.crowd.models import SimWorker
from campaign.market.worker_client import WorkerAPIError, WorkerClient
from campaign.rng import rng_for, stable_seeds
from campaign.tasks import for_page

log = logging.getLogger(__name__)
_T = TypeVar("_T")
_R = TypeVar("_R")

RETURN_PROBABILITY = 0.02  # a worker sometimes accepts, then returns the HIT unanswered
IDLE_MAX = 0.5  # wall seconds between passes of a crowd that found nothing to do, at most
SKIP_ERRORS = {"DoesNotMeetRequirements", "Blocked", "AlreadyWorked"}
# Workers who list the open HITs in one pass, at most; the others list in later passes, in turn. Every
# worker of a pass is offered the HITs any lister found, so with one qualification for everyone a few
# listings find what all would (the oldest `max` open HITs). At 470,000 propositions the bench's 1,600
# workers each listed every pass: 39% of the crowd's time and about half the marketplace's (docs/scale.md).
LIST_WINDOW = 100


@dataclass
class CrowdStats:
    accepted: int = 0
    submitted: int = 0
    returned: int = 0
    refused: int = 0
    errors: int = 0
    by_worker: dict[str, int] = field(default_factory=dict)


class Answerer:
    """How a simulated person fills in a HIT's form from each shown item's hidden truth. Shared by the
    crowd on the marketplace's worker site and the Prolific participants, so both answer alike."""

    def __init__(self, truth_by_text: Mapping[str, float]) -> None:
        self.truth = {norm_text(k): float(v) for k, v in truth_by_text.items()}

    def truth_of(self, text: str) -> float:
        """Hidden importance of a shown statement; unknown text (a trap) is judged unimportant."""
        return self.truth.get(norm_text(text), 0.0)

    def answer(self, w: SimWorker, form: Form, rng: np.random.Generator) -> list[tuple[str, str]]:
        """The form's fields as the HIT's task kind (named by the form's `data-task`) says this worker fills them in."""
        kind = for_page(form.data.get("task"))
        return [("assignmentId", form.hidden.get("assignmentId", ""))] + kind.simulate(w, form, self.truth_of, rng)


class SimulatedCrowd:
    def __init__(self, base_url: str, workers: Sequence[SimWorker], truth_by_text: Mapping[str, float], seed: int,
                 clock: Clock, poll: float = 0.1, client: WorkerClient | None = None,
                 wants: Callable[[str], bool] | None = None, adversaries: Mapping[str, str] | None = None,
                 threads: int = 1) -> None:
        """`adversaries`: worker id -> behaviour (`campaign.crowd.adversaries.assign`) for the workers
        of this crowd who misbehave; the others answer as their kind does.

        `threads`: how many HITs are listed and filled at once. A real crowd is many people at once; one
        thread makes its four requests per answer one after another, so on a wall clock the crowd's
        pace is the marketplace's latency, not the marketplace's or the daemons' capacity (the scale
        bench's bound, docs/scale.md). Who answers what does not depend on it (see the module doc):
        each HIT's slots are still filled in its own seeded order by one thread."""
        self.base_url = base_url.rstrip("/")
        self.client = client or WorkerClient(base_url)
        self.workers = list(workers)
        self.by_id = {w.worker_id: w for w in self.workers}
        self.answerer = Answerer(truth_by_text)
        self.truth = self.answerer.truth
        self.seed = seed
        self.clock = clock
        self.poll = poll
        self.stats = CrowdStats()
        self._done: set[tuple[str, str]] = set()  # (hit_id, worker_id) tried, never again
        self._content: dict[str, str] = {}  # hit_id -> content hash
        self._seen_by: dict[str, str] = {}  # hit_id -> a worker it was listed for (who previews it)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_time: float | None = None
        self.on_error: Callable[[Exception], None] | None = None
        self.wants = wants  # which HITs (by id) this crowd works; None: every HIT it is shown
        self._accepted: deque[tuple[str, str, str]] = deque(maxlen=200)  # (assignment, worker, HIT id), newest last
        self.threads = max(1, int(threads))
        self._pool: ThreadPoolExecutor | None = None
        self._stats_lock = threading.Lock()
        self.adversaries = SiteAdversaries(self.base_url, self.client, dict(adversaries or {}), self.answer,
                                           lambda: list(reversed(self._accepted)))
        self._list_from = 0  # where in the present workers the next pass's listers start (`LIST_WINDOW`)

    # -- life cycle -----------------------------------------------------------------------------------
    def register(self) -> None:
        for w in self.workers:
            self.client.register(w.worker_id, country=w.locale, approval=w.approval_rate, approved=w.approved_hits)

    def prepare(self) -> None:
        """Sign the workers up and start the arrivals' clock; `start` then works on a thread, or a
        virtual-time run's timeline calls `step` whenever `next_due` says."""
        self.register()
        self._start_time = self.clock.now()

    def next_due(self) -> float:
        """The simulated time of the next worker's arrival (infinity once all have arrived): the only
        moment this crowd acts without being woken by a change on the marketplace."""
        start = self._start_time if self._start_time is not None else self.clock.now()
        return min((start + w.arrival for w in self.workers if not self.arrived(w)), default=math.inf)

    def start(self) -> None:
        self.prepare()
        self._thread = threading.Thread(target=self._loop, name="simulated-crowd", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _map(self, fn: Callable[[_T], _R], args: Sequence[_T], side_by_side: bool = True) -> list[_R]:
        """`fn` over `args`, on the pool when this crowd has more than one thread and `side_by_side`
        (results in order)."""
        if self.threads == 1 or not side_by_side or len(args) < 2:
            return [fn(a) for a in args]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="crowd-fill")
        return list(self._pool.map(fn, args))

    def _count(self, name: str, worker_id: str | None = None, n: int = 1) -> None:
        with self._stats_lock:
            setattr(self.stats, name, getattr(self.stats, name) + n)
            if worker_id is not None:
                self.stats.by_worker[worker_id] = self.stats.by_worker.get(worker_id, 0) + 1

    def _loop(self) -> None:
        idle = self.poll
        while not self._stop.is_set():
            try:
                worked = self.step(exhaustive=False)
            except Exception as exc:  # the crowd must not die silently; report and keep going
                self.stats.errors += 1
                log.warning("simulated crowd: %s", exc)
                if self.on_error:
                    self.on_error(exc)
                worked = 0
            if worked:
                idle = self.poll
            else:
                # a pass lists the HITs once per listing worker: polled every `poll` seconds while
                # nothing is open, those listings were a large share of the marketplace's requests; so
                # an idle crowd looks less and less often, up to IDLE_MAX (timing only: who answers
                # what does not depend on it)
                self._stop.wait(idle)
                idle = min(max(self.poll, IDLE_MAX), idle * 2)

    # -- one pass over the marketplace ----------------------------------------------------------------
    def arrived(self, w: SimWorker) -> bool:
        start = self._start_time if self._start_time is not None else self.clock.now()
        return self.clock.now() >= start + w.arrival

    def step(self, exhaustive: bool = True) -> int:
        """Fill every open slot that a worker can take now; returns the number of answers submitted.

        Up to `LIST_WINDOW` present workers list the open HITs, the next ones in turn on the next pass.
        `exhaustive`: a pass whose listers found nothing to answer asks every other present worker too,
        so it answers nothing only when no present worker is offered anything; a virtual-time run steps
        the crowd only when something changes, and must not wait on a HIT that an unlisted worker alone
        sees. The wall-clock loop passes False: its next pass lists the next workers anyway. Each HIT
        found is offered to every worker in its own seeded order, whoever found it."""
        present = [w for w in self.workers if self.arrived(w)]
        if len(present) <= LIST_WINDOW:
            return self._fill_listed(present)
        start = self._list_from % len(present)
        self._list_from = start + LIST_WINDOW
        window = (present[start:] + present[:start])[:LIST_WINDOW]
        done = self._fill_listed(window)
        if done or not exhaustive or self._stop.is_set():
            return done
        listed = {w.worker_id for w in window}
        return self._fill_listed([w for w in present if w.worker_id not in listed])

    def _fill_listed(self, listers: Sequence[SimWorker]) -> int:
        """Lists the open HITs for each of `listers` and fills every HIT found; the answers submitted."""
        hits: dict[str, dict] = {}
        listings = self._map(lambda w: self.client.available(w.worker_id, max=100), listers)
        for w, listed in zip(listers, listings):
            for h in listed:
                if self.wants is None or self.wants(h["HITId"]):
                    hits.setdefault(h["HITId"], h)
                    self._seen_by.setdefault(h["HITId"], w.worker_id)
        # oldest first; HITs posted at one instant keep the marketplace's listing order (its posting
        # order), never the order of their random ids, which would differ from run to run. With
        # several threads the HITs are filled side by side, each by one thread in its own order.
        # Adversaries act across HITs (someone else's assignment, double submits): then one HIT at a time.
        order = sorted(hits, key=lambda h: hits[h].get("CreationTime", 0))
        return sum(self._map(lambda h: 0 if self._stop.is_set() else self._fill(h, hits[h]), order,
                             side_by_side=not self.adversaries.behaviours))

    def _content_hash(self, hit_id: str) -> str:
        if hit_id not in self._content:
            # previewed by a worker who was shown it (a HIT may be open to qualified workers only); the
            # preview's HTML is the same whoever looks, so the hash does not depend on who that was
            html = self.client.preview_html(self._seen_by[hit_id], hit_id)
            self._content[hit_id] = hashlib.sha256(html.encode("utf-8")).hexdigest()
        return self._content[hit_id]

    def _fill(self, hit_id: str, hit: dict | None = None) -> int:
        content = self._content_hash(hit_id)
        keys = stable_seeds((self.seed, "slot-order", content), (w.worker_id for w in self.workers))
        order = [w for _, _, w in sorted(zip(keys, range(len(keys)), self.workers))]  # stable_seed order, ties as listed
        submitted = 0
        for w in order:
            if (hit_id, w.worker_id) in self._done:
                continue
            if not self.arrived(w):
                break  # wait for this worker rather than skipping it: keeps the run deterministic
            self._done.add((hit_id, w.worker_id))
            try:
                acc = self.client.accept(w.worker_id, hit_id)
            except WorkerAPIError as exc:
                if exc.code in SKIP_ERRORS:
                    self._count("refused")
                    continue
                if exc.code in ("NoAvailableSlot", "HITNotFound"):
                    self._done.discard((hit_id, w.worker_id))
                    break
                raise
            self._count("accepted")
            aid = acc["AssignmentId"]
            self._accepted.append((aid, w.worker_id, hit_id))
            rng = rng_for(self.seed, "answer", w.worker_id, content)
            if self.adversaries.behaviour(w.worker_id) is not None:
                n = self.adversaries.work(w, hit or {}, aid, rng)
                self._count("submitted", n=n)
                submitted += n
                continue
            if rng.random() < RETURN_PROBABILITY:
                self.client.return_assignment(aid)
                self._count("returned")
                continue
            html = self.client.task_html(aid)
            fields = self.answer(w, parse_form(html), rng)
            self.client.submit(aid, fields)
            self._count("submitted", w.worker_id)
            submitted += 1
        return submitted

    # -- answering ------------------------------------------------------------------------------------
    def truth_of(self, text: str) -> float:
        return self.answerer.truth_of(text)

    def answer(self, w: SimWorker, form: Form, rng: np.random.Generator) -> list[tuple[str, str]]:
        return self.answerer.answer(w, form, rng)
