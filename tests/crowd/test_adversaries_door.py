"""Adversarial Prolific participants (campaign.crowd.adversary_door), in-process: the emulator, the task
site's door and the Prolific marketplace adapter with real Likert pages. Every behaviour goes through the
participant app and the door's API; what the door refuses, and what reaches the marketplace, is checked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from campaign.crowd.models import SimWorker
from campaign.crowd.participants import ParticipantCrowd
from campaign.spec import ADVERSARY_BEHAVIOURS
from tests.prolific.support import likert_study
from tests.support.waiting import until

pytestmark = pytest.mark.prolific

N_HITS, PER_HIT, ASSIGNMENTS, BUNDLE = 16, 4, 6, 3  # more slots than every first bundle takes, so no
# adversary finds the work gone before it acts, however the threads are scheduled
TEXTS = {f"Statement number {i} about water quality in the region.": i / (N_HITS * PER_HIT - 1)
         for i in range(N_HITS * PER_HIT)}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict]:
    with likert_study(tmp_path, list(TEXTS), N_HITS, PER_HIT, ASSIGNMENTS, BUNDLE) as (st, t, hits):
        yield {"clock": st.clock, "em": st.em, "server": st.server, "api": st.api, "door": st.door, "market": st.market,
               "hits": hits, "study": st.studies.study(t).study_id}  # type: ignore[union-attr]


def test_adversarial_participants_go_through_the_door(world: dict) -> None:
    w = world
    honest = [SimWorker(f"AHONEST{i:07d}", "diligent", noise=0.05) for i in range(6)]
    bad = {f"ABAD{b.upper().replace('_', '')[:10]:0<10}": b for b in ADVERSARY_BEHAVIOURS}
    workers = honest + [SimWorker(wid, "diligent", noise=0.05) for wid in bad]
    crowd = ParticipantCrowd(w["em"].root_url, w["em"].token, w["server"].endpoint_url, workers, TEXTS, 3, w["clock"],
                             poll=0.02, return_share=0.0, abandon_share=0.0, adversaries=bad)
    crowd.start()
    try:
        # every adversary has started a place and acted on it, and honest participants have completed theirs
        def waiting_for() -> list[str]:
            """What is still missing (empty once everything happened); named in the timeout's message."""
            holding = [b for wid, b in bad.items() if b != "double_submit" and wid in crowd._sessions]
            untried = [b for b in ADVERSARY_BEHAVIOURS if crowd.adversaries.stats.tried.get(b, 0) < 1]
            return ([f"started {crowd.stats.started}/{len(workers)}"] if crowd.stats.started < len(workers) else []) + \
                ([f"completed {crowd.stats.completed}/3"] if crowd.stats.completed < 3 else []) + \
                [f"still in a place: {', '.join(holding)}"] * bool(holding) + [f"not tried: {', '.join(untried)}"] * bool(untried)

        try:
            until(lambda: not waiting_for())
        except AssertionError as exc:
            raise AssertionError(f"{exc}; waiting for: {'; '.join(waiting_for())}") from None
    finally:
        crowd.stop()
    stats = crowd.adversaries.stats
    assert crowd.stats.errors == 0, crowd.stats
    for b in ADVERSARY_BEHAVIOURS:
        assert stats.tried.get(b, 0) >= 1, (b, stats)
    # someone else's assignment, and an answer given twice, are refused by the door
    assert stats.refused.get("foreign", 0) >= 1 and not stats.accepted.get("foreign")
    assert stats.refused.get("double_submit", 0) >= 1 and not stats.accepted.get("double_submit")
    assert {"NotYourAssignment", "AssignmentNotActive"} <= set(stats.codes)
    # a place completed without work reaches Prolific as a submission with nothing behind it on the site
    no_work = crowd.participants[next(wid for wid, b in bad.items() if b == "no_work")]
    subs = no_work.submissions()
    assert subs and all(w["door"].assignments_of(s["id"]) == [] for s in subs)
    assert {s["status"] for s in subs} <= {"AWAITING REVIEW", "APPROVED", "ACTIVE"}
    # a participant who returned mid-bundle has between 1 and BUNDLE - 1 answers in a RETURNED place
    mid = crowd.participants[next(wid for wid, b in bad.items() if b == "return_midway")]
    returned = [s for s in mid.submissions() if s["status"] == "RETURNED"]
    assert returned and all(1 <= len(w["door"].assignments_of(s["id"])) < BUNDLE for s in returned)


def test_return_midway_returns_before_the_bundles_last_hit_and_keeps_its_draws_for_longer_bundles() -> None:
    """A bundle of 3 used to draw 1-3 HITs before returning: a draw of 3 completed the place instead, and
    the behaviour went untried (this file's test failed about one run in ten). For bundles of 4 or more
    the draw is what it was, so seeded runs with the examples' bundle of 5 are unchanged."""
    from campaign.crowd.adversary_door import DoorAdversaries
    from campaign.rng import rng_for

    w = SimWorker("ABADRETURN", "diligent", noise=0.05)
    door = DoorAdversaries({w.worker_id: "return_midway"}, answer=lambda *_: None, seed=7)  # type: ignore[arg-type]

    def first_stop(sub: str, bundle: int) -> int | None:
        return next((done for done in range(bundle) if door.stops_before(w, sub, done, bundle) == "return"), None)

    subs = [f"S{i}" for i in range(200)]
    assert {first_stop(s, 3) for s in subs} == {1, 2}
    assert {first_stop(s, 2) for s in subs} == {1}
    for s in subs:
        old = 1 + int(rng_for(7, "return-midway", w.worker_id, s).integers(0, 3))
        assert first_stop(s, 5) == old
