"""Adversarial Prolific participants (campaign.crowd.adversary_door), in-process: the emulator, the task
site's door and the Prolific marketplace adapter with real Likert pages. Every behaviour goes through the
participant app and the door's API; what the door refuses, and what reaches the marketplace, is checked."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from campaign.clock import ManualClock
from campaign.crowd.models import SimWorker
from campaign.crowd.participants import ParticipantCrowd
from campaign.market.prolific_site import ProlificDoor
from campaign.market.server import start_market
from campaign.marketplaces import open_marketplace
from campaign.marketplaces.base import HitRequest, HitType
from campaign.marketplaces.prolific import ProlificMarketplace
from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.server import start_emulator
from campaign.prolific.studies import ProlificStudies
from campaign.prolific.study import ProlificConfig
from campaign.spec import ADVERSARY_BEHAVIOURS, Qualifications
from campaign.tasks import likert
from campaign.tasks.base import ShownItem

pytestmark = pytest.mark.prolific

N_HITS, PER_HIT, ASSIGNMENTS, BUNDLE = 16, 4, 6, 3  # more slots than every first bundle takes, so no
# adversary finds the work gone before it acts, however the threads are scheduled
TEXTS = {f"Statement number {i} about water quality in the region.": i / (N_HITS * PER_HIT - 1)
         for i in range(N_HITS * PER_HIT)}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict]:
    clock = ManualClock()
    em = start_emulator(tmp_path / "em", clock, fee_rate=Decimal("0.3"))
    server = start_market(tmp_path / "market", clock=clock, mode="prod", balance=Decimal("100.00"))
    api = ProlificClient(em.base_url, em.token, max_retries=0)
    door = ProlificDoor(server.engine, server.core.site.config, tmp_path / "site", api, ttl=0)
    server.core.site.prolific = door
    cfg = ProlificConfig(public_url=server.endpoint_url, bundle=BUNDLE, estimated_minutes=10, maximum_minutes=30,
                         reward=Decimal("1.50"), countries=("US", "GB"))
    studies = ProlificStudies(api, tmp_path / "journal")
    inner = open_marketplace("local", server.endpoint_url, credentials=server.credentials)
    m = ProlificMarketplace(inner, studies, door, cfg, tmp_path / "adapter")
    try:
        t = m.create_hit_type(HitType(title="Rate", description="Rate statements", reward=Decimal("0.10"), duration=600,
                                      auto_approval_delay=86400, keywords="k", qualifications=Qualifications()), sandbox=True)
        texts = list(TEXTS)
        hits = []
        for i in range(N_HITS):
            items = [ShownItem(f"s{i}-{j}", texts[i * PER_HIT + j]) for j in range(PER_HIT)]
            hits.append(m.create_hit(t, HitRequest(html=likert.page(items, "Water", "Rate the statements"),
                                                   max_assignments=ASSIGNMENTS, lifetime=86400, annotation=f"a{i}",
                                                   token=f"t{i}")).hit_id)
        m.refill(t, m.places_wanted()[t])
        yield {"clock": clock, "em": em, "server": server, "api": api, "door": door, "market": m, "hits": hits,
               "study": studies.study(t)["study_id"]}  # type: ignore[index]
    finally:
        m.close()
        studies.close()
        server.stop()
        door.close()
        em.stop()


def _until(cond: Callable[[], bool], timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


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
        _until(lambda: crowd.stats.started >= len(workers) and crowd.stats.completed >= 3 and not any(
            wid in crowd._sessions for wid, b in bad.items() if b != "double_submit")
            and all(crowd.adversaries.stats.tried.get(b, 0) >= 1 for b in ADVERSARY_BEHAVIOURS))
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
