"""`SimulatedCrowd(threads=N)`: HITs filled side by side give the same answers as one after another."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest

from campaign.clock import ManualClock
from campaign.crowd.models import SimWorker
from campaign.crowd.runner import SimulatedCrowd
from campaign.market.server import start_market
from campaign.marketplaces import open_marketplace
from campaign.marketplaces.base import HitRequest, HitType
from campaign.spec import Qualifications
from campaign.tasks import likert
from campaign.tasks.base import ShownItem

N_HITS, PER_HIT, SLOTS = 16, 5, 3
TEXTS = {f"Statement {i} about river water and who tests it.": i / (N_HITS * PER_HIT) for i in range(N_HITS * PER_HIT)}
KINDS = ("diligent", "noisy", "random_spammer", "constant_spammer")


def _work(folder: Path, threads: int) -> tuple[list[tuple[str, str, str, str]], int]:
    """Every slot filled by a crowd of `threads` on a fresh marketplace: (HIT annotation, worker, status,
    answer without its assignment id) for each assignment, and the answers the crowd counted."""
    clock = ManualClock()
    server = start_market(folder, clock=clock, mode="prod", balance=Decimal("100.00"))
    try:
        m = open_marketplace("local", server.endpoint_url, credentials=server.credentials)
        t = m.create_hit_type(HitType(title="Rate", description="Rate statements", reward=Decimal("0.10"), duration=600,
                                      auto_approval_delay=86400, keywords="k", qualifications=Qualifications()),
                              sandbox=False)
        texts = list(TEXTS)
        for i in range(N_HITS):
            items = [ShownItem(f"s{i}-{j}", texts[i * PER_HIT + j]) for j in range(PER_HIT)]
            m.create_hit(t, HitRequest(html=likert.page(items, "Water", "Rate"), max_assignments=SLOTS, lifetime=86400,
                                       annotation=f"a{i}", token=f"t{i}"))
        workers = [SimWorker(f"AWORKER{k:07d}", KINDS[k % len(KINDS)]) for k in range(7)]
        crowd = SimulatedCrowd(server.endpoint_url, workers, TEXTS, seed=5, clock=clock, poll=0.01, threads=threads)
        crowd.prepare()
        try:
            while crowd.step():
                pass
        finally:
            crowd.stop()
        with server.engine.db.read() as c:
            rows = c.execute("SELECT h.annotation, a.worker_id, a.status, a.answer, a.id FROM assignments a "
                             "JOIN hits h ON h.id = a.hit_id").fetchall()
        return sorted((ann, w, st, (ans or "").replace(aid, "")) for ann, w, st, ans, aid in rows), crowd.stats.submitted
    finally:
        server.stop()


@pytest.mark.slow  # two marketplaces: about 3 s
def test_threads_fill_the_same_slots_with_the_same_answers(tmp_path: Path) -> None:
    one, submitted_one = _work(tmp_path / "one", threads=1)
    four, submitted_four = _work(tmp_path / "four", threads=4)
    assert len({a for a, *_ in one}) == N_HITS and submitted_one >= N_HITS * SLOTS
    assert all(re.search(r"<FreeText>[1-5]</FreeText>", ans) for _, _, st, ans in one if st == "Submitted")
    assert four == one
    assert submitted_four == submitted_one
