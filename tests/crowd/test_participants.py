"""The simulated crowd as Prolific participants, end to end in-process: emulator, task site with the
door, the Prolific marketplace adapter, real Likert pages; the crowd finds the study, starts it, does its
bundles through the door and completes through the redirect."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from campaign.clock import ManualClock
from campaign.crowd.forms import parse_form
from campaign.crowd.models import SimWorker
from campaign.crowd.participants import ParticipantCrowd
from campaign.market.prolific_site import ProlificDoor
from campaign.market.server import RunningMarket
from campaign.marketplaces.prolific import ProlificMarketplace
from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.participant import ParticipantError
from campaign.prolific.emulator.server import RunningEmulator, start_emulator
from campaign.prolific.studies import ProlificStudies
from tests.prolific.support import likert_study
from tests.support.waiting import until

pytestmark = pytest.mark.prolific

N_HITS, PER_HIT, ASSIGNMENTS, BUNDLE = 6, 4, 3, 2
STATEMENTS = {f"Statement number {i} about water quality in the region.": i / (N_HITS * PER_HIT - 1)
              for i in range(N_HITS * PER_HIT)}


@dataclass
class World:
    tmp: Path
    clock: ManualClock
    em: RunningEmulator
    server: RunningMarket
    api: ProlificClient
    door: ProlificDoor
    market: ProlificMarketplace
    studies: ProlificStudies
    type_id: str
    study_id: str
    hits: list[str]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with likert_study(tmp_path, list(STATEMENTS), N_HITS, PER_HIT, ASSIGNMENTS, BUNDLE) as (st, t, hits):
        sid = st.studies.study(t).study_id  # type: ignore[union-attr]
        world = World(tmp_path, st.clock, st.em, st.server, st.api, st.door, st.market, st.studies, t, sid, hits)
        try:
            yield world
        finally:
            st.em = world.em  # a test may have restarted it


def _workers(n_honest: int, n_spam: int, *, locale: str = "US") -> list[SimWorker]:
    honest = [SimWorker(f"AHONEST{i:07d}", "diligent", noise=0.05, locale=locale) for i in range(n_honest)]
    spam = [SimWorker(f"ASPAMMER{i:06d}", "constant_spammer", constant=1 + i % 5, locale=locale) for i in range(n_spam)]
    return honest + spam


def _crowd(w: World, workers: list[SimWorker], seed: int = 7, **kw: float) -> ParticipantCrowd:
    return ParticipantCrowd(w.em.root_url, w.em.token, w.server.endpoint_url, workers, STATEMENTS, seed, w.clock,
                            poll=0.02, **kw)


def _slots_submitted(w: World) -> int:
    return sum(len(w.market.submissions(h)) for h in w.hits)


@pytest.mark.slow
def test_crowd_fills_the_study_spammers_spam_honest_track_truth(world: World) -> None:
    w = world
    workers = _workers(8, 4)
    crowd = _crowd(w, workers, return_share=0.0, abandon_share=0.0)
    crowd.start()
    try:
        until(lambda: _slots_submitted(w) == N_HITS * ASSIGNMENTS and crowd.stats.completed == N_HITS * ASSIGNMENTS // BUNDLE)
    finally:
        crowd.stop()
    assert crowd.stats.errors == 0
    subs = w.api.submissions(w.study_id)
    assert len(subs) == N_HITS * ASSIGNMENTS // BUNDLE  # every place taken once
    assert {s["status"] for s in subs} == {"AWAITING REVIEW"}
    assert crowd.stats.submitted == N_HITS * ASSIGNMENTS and crowd.stats.started == len(subs)

    by_site_id = {crowd.task_site_worker_id(x.worker_id): x for x in workers}
    seen: set[tuple[str, str]] = set()
    ratings: dict[str, list[tuple[float, int]]] = {}
    for h in w.hits:
        for a in w.market.submissions(h):
            assert (a.worker_id, h) not in seen  # never the same HIT twice for one participant
            seen.add((a.worker_id, h))
            sim = by_site_id[a.worker_id]  # every answer came from one of our participants
            fields = dict(w.market.answer_fields(a.answer))
            sub = w.door.submission_of(a.assignment_id)
            assert sub is not None and fields.get("prolific_submission_id") == sub[0]
            texts = list(STATEMENTS)[w.hits.index(h) * PER_HIT:(w.hits.index(h) + 1) * PER_HIT]
            for j, text in enumerate(texts):
                ratings.setdefault(sim.worker_id, []).append((STATEMENTS[text], int(fields[f"rating-{j}"])))
    spammers = [x for x in workers if x.is_spammer and x.worker_id in ratings]
    honest = [x for x in workers if not x.is_spammer and x.worker_id in ratings]
    assert spammers and honest
    for x in spammers:
        assert {r for _, r in ratings[x.worker_id]} == {x.constant}  # a constant spammer's answers are constant
    truth = [t for x in honest for t, _ in ratings[x.worker_id]]
    given = [r for x in honest for _, r in ratings[x.worker_id]]
    assert float(np.corrcoef(truth, given)[0, 1]) > 0.9  # honest answers track the hidden truth


@pytest.mark.slow
def test_leavers_return_or_time_out_and_their_places_are_filled_again(world: World) -> None:
    w = world
    workers = _workers(14, 2)

    def leavers(seed: int) -> set[str]:
        c = _crowd(w, workers, seed=seed, return_share=0.25, abandon_share=0.25)
        return {c._fate(x, 0) for x in c._order[:6]} - {"work"}  # the first six of the order surely get a place

    seed = next(s for s in range(100) if leavers(s) == {"return", "abandon"})  # a seed with both kinds of leaver
    crowd = _crowd(w, workers, seed=seed, return_share=0.25, abandon_share=0.25)
    crowd.start()
    try:
        until(lambda: crowd.stats.started >= N_HITS * ASSIGNMENTS // BUNDLE and not crowd._sessions
               and (crowd.stats.returned + crowd.stats.abandoned) > 0 and _slots_submitted(w) > 0)
        time.sleep(0.3)
        assert crowd.stats.returned >= 1 and crowd.stats.abandoned >= 1, crowd.stats

        def advance_paused() -> bool:
            """Past the study's maximum time, with the crowd paused and nobody half-way through a bundle
            (their sessions would time out under them): abandoned places time out and reopen."""
            crowd.stop()
            crowd._thread = None
            idle = not crowd._sessions
            if idle:
                w.clock.advance(31 * 60)
            crowd.start()
            return idle

        until(advance_paused)
        moved = [time.monotonic()]

        def daemon_pass() -> bool:
            """What the daemon's passes do meanwhile: the places step opens what the work needs (lost places
            reopen on Prolific; none is added for them), and time goes on, so a participant who left after
            the advance above times out too."""
            if _slots_submitted(w) == N_HITS * ASSIGNMENTS:
                return True
            if time.monotonic() - moved[0] > 0.5:
                advance_paused()
                moved[0] = time.monotonic()
            w.market.refill(w.type_id, w.market.places_wanted()[w.type_id])
            return False

        until(daemon_pass)
    finally:
        crowd.stop()
    assert crowd.stats.errors == 0
    subs = w.api.submissions(w.study_id)
    by_status: dict[str, int] = {}
    for s in subs:
        by_status[s["status"]] = by_status.get(s["status"], 0) + 1
    assert by_status.get("RETURNED", 0) == crowd.stats.returned
    timed_out = by_status.get("TIMED-OUT", 0)
    assert 1 <= timed_out <= crowd.stats.abandoned  # those who left after the clock moved are not timed out yet
    assert by_status.get("AWAITING REVIEW", 0) == crowd.stats.completed == N_HITS * ASSIGNMENTS // BUNDLE
    # A few participants may still hold a place with no HIT left for them, waiting as the site tells them.
    assert by_status.get("ACTIVE", 0) == len(crowd._sessions) + crowd.stats.abandoned - timed_out
    assert set(by_status) <= {"RETURNED", "TIMED-OUT", "AWAITING REVIEW", "ACTIVE"}
    waiting = {s.submission_id for s in crowd._sessions.values()}
    assert not any(w.door.assignments_of(sub) for sub in waiting)
    pairs = [(a.worker_id, h) for h in w.hits for a in w.market.submissions(h)]
    assert len(pairs) == len(set(pairs))


def test_a_restarted_crowd_is_the_same_people(world: World) -> None:
    w = world
    workers = _workers(3, 1)
    first = _crowd(w, workers)
    first.register()
    ids = {x.worker_id: first.task_site_worker_id(x.worker_id) for x in workers}
    assert len(set(ids.values())) == len(workers)
    old = first.participants[workers[0].worker_id]
    old.studies()  # the first crowd's secret works ...

    w.em.stop()  # the emulator restarts from its state directory
    w.em = start_emulator(w.tmp / "em", w.clock, fee_rate=Decimal("0.3"))
    second = _crowd(w, workers)
    second.register()
    assert {x.worker_id: second.task_site_worker_id(x.worker_id) for x in workers} == ids
    with pytest.raises(ParticipantError) as gone:
        old.__class__(w.em.root_url, old.id, old._auth.rsplit(":", 1)[1]).studies()
    assert gone.value.status == 401  # ... and is replaced by the new one
    assert second.participants[workers[0].worker_id].studies() is not None
    other = _crowd(w, _workers(3, 1, locale="GB"), seed=99)
    other.register()  # the same worker ids map to the same people whatever the crowd's seed
    assert {x.worker_id: other.task_site_worker_id(x.worker_id) for x in workers} == ids


def test_a_restarted_crowd_goes_on_with_the_bundle_it_had_started(world: World) -> None:
    w = world
    workers = _workers(2, 0)
    first = _crowd(w, workers, return_share=0.0, abandon_share=0.0)
    first.register()
    me = workers[0]
    session = first._take(me, first.participants[me.worker_id], {"id": w.study_id})
    assert session is not None
    step = first._call("GET", "/prolific/api/next", session.query)
    html = first._call("GET", "/prolific/api/task", {**session.query, "assignmentId": step["AssignmentId"]}, raw=True)
    fields = first.answerer.answer(me, parse_form(html), np.random.default_rng(0))
    step = first._call("POST", "/prolific/api/submit", {**session.query, "assignmentId": step["AssignmentId"], "fields": fields})
    assert step["status"] == "task"  # one HIT of the bundle done, the next one handed out: then the crowd stops
    first.stop()

    second = _crowd(w, workers, return_share=0.0, abandon_share=0.0)
    second.start()
    try:
        assert second.stats.resumed == 1
        until(lambda: w.api.submission(session.submission_id)["status"] == "AWAITING REVIEW")
    finally:
        second.stop()
    assert len(w.door.assignments_of(session.submission_id)) == BUNDLE  # the bundle finished, not restarted
    assert second.stats.submitted >= BUNDLE - 1 and second.stats.errors == 0


def test_two_crowds_with_the_same_worker_ids_keep_apart(world: World) -> None:
    w = world
    workers = _workers(3, 0)
    a = _crowd(w, workers, namespace="campaign-a", return_share=0.0, abandon_share=0.0)
    b = _crowd(w, workers, namespace="campaign-b", wants=lambda study: False)  # works none of the open studies
    a.register()
    b.register()  # does not reset a's secrets: different people
    ids_a = {a.task_site_worker_id(x.worker_id) for x in workers}
    ids_b = {b.task_site_worker_id(x.worker_id) for x in workers}
    assert not ids_a & ids_b
    a.start()
    b.start()
    try:
        until(lambda: a.stats.completed >= len(workers))  # each may go on to more bundles
        time.sleep(0.2)
    finally:
        a.stop()
        b.stop()
    assert a.stats.errors == b.stats.errors == 0
    assert b.stats.started == 0
    assert {s["participant_id"] for s in w.api.submissions(w.study_id)} == {i[2:].lower() for i in ids_a}
