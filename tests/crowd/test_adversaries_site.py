"""Adversaries on the built-in marketplace's worker site (campaign.crowd.adversary_site), in-process:
real Likert pages, the worker origin's API and the content origin's form target. Each behaviour is
carried out over HTTP and leaves in the marketplace exactly the trace a person doing it would."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from campaign.clock import ManualClock
from campaign.crowd.adversaries import control_fields, garbage_body
from campaign.crowd.models import SimWorker, rng_for
from campaign.crowd.runner import SimulatedCrowd
from campaign.market.server import RunningMarket, start_market
from campaign.marketplaces import open_marketplace
from campaign.marketplaces.base import HitRequest, HitType
from campaign.spec import ADVERSARY_BEHAVIOURS, Qualifications
from campaign.tasks import likert
from campaign.tasks.base import ShownItem

N_HITS, PER_HIT = 6, 5
TEXTS = {f"Statement {i} about water bottles and their use.": i / (N_HITS * PER_HIT) for i in range(N_HITS * PER_HIT)}


@pytest.fixture
def market(tmp_path: Path) -> Iterator[tuple[RunningMarket, list[str], ManualClock]]:
    clock = ManualClock()
    server = start_market(tmp_path / "market", clock=clock, mode="prod", balance=Decimal("100.00"))
    m = open_marketplace("local", server.endpoint_url, credentials=server.credentials)
    t = m.create_hit_type(HitType(title="Rate", description="Rate statements", reward=Decimal("0.10"), duration=600,
                                  auto_approval_delay=86400, keywords="k", qualifications=Qualifications()), sandbox=False)
    texts = list(TEXTS)
    hits = []
    for i in range(N_HITS):
        items = [ShownItem(f"s{i}-{j}", texts[i * PER_HIT + j]) for j in range(PER_HIT)]
        hits.append(m.create_hit(t, HitRequest(html=likert.page(items, "Water", "Rate"), max_assignments=13,
                                               lifetime=86400, annotation=f"a{i}", token=f"t{i}")).hit_id)
    try:
        yield server, hits, clock
    finally:
        server.stop()


def _assignments(server: RunningMarket) -> list[dict]:
    with server.engine.db.read() as c:
        rows = c.execute("SELECT id, hit_id, worker_id, status, answer FROM assignments ORDER BY seq").fetchall()
    return [{"id": r[0], "hit": r[1], "worker": r[2], "status": r[3], "answer": r[4]} for r in rows]


def test_every_behaviour_goes_through_the_worker_side(market: tuple[RunningMarket, list[str], ManualClock]) -> None:
    server, hits, clock = market
    workers = [SimWorker(f"AHONEST{i:07d}", "diligent") for i in range(4)]
    bad = {f"ABAD{b.upper().replace('_', '')[:10]:0<10}": b for b in ADVERSARY_BEHAVIOURS}
    workers += [SimWorker(wid, "diligent") for wid in bad]
    crowd = SimulatedCrowd(server.endpoint_url, workers, TEXTS, seed=1, clock=clock, poll=0.01, adversaries=bad)
    crowd.register()
    crowd._start_time = clock.now()
    for _ in range(4):
        crowd.step()
    rows = _assignments(server)
    by_worker: dict[str, list[dict]] = {}
    for r in rows:
        by_worker.setdefault(r["worker"], []).append(r)
    stats = crowd.adversaries.stats
    for wid, b in bad.items():
        mine = by_worker.get(wid, [])
        assert mine, f"{b} never got an assignment"
        assert stats.tried.get(b, 0) > 0, b
        if b == "hold":
            # every HIT held and none answered by the holder; but the content origin knows an assignment by
            # its id alone (as MTurk's externalSubmit does), so `foreign`, knowing a held id, answered some
            answered = sum(1 for r in mine if r["status"] == "Submitted")
            assert len(mine) == N_HITS and answered == stats.accepted.get("foreign", 0)
            assert {r["status"] for r in mine} <= {"Accepted", "Submitted"}
        if b in ("return_midway", "foreign"):
            assert {r["status"] for r in mine} == {"Returned"}  # own work handed back unanswered
    # a second answer to an answered assignment, on either origin, is refused; the first one stands
    assert stats.refused.get("double_submit", 0) == 2 * stats.accepted.get("double_submit", 0) > 0
    for r in by_worker[next(w for w, b in bad.items() if b == "double_submit")]:
        assert r["status"] == "Submitted" and re.findall(r"<FreeText>(\d+)</FreeText>", r["answer"])
        assert not re.search(r"<FreeText>\d\d+</FreeText>", r["answer"])  # the later posts ("51", ...) did not replace it
    # someone else's assignment through one's own session looks like an unknown one
    assert stats.codes.get("AssignmentNotFound", 0) >= 1
    # nothing an adversary posted reached anyone else's answer through their own session, and honest work is intact
    for wid in (w.worker_id for w in workers[:4]):
        assert {r["status"] for r in by_worker.get(wid, [])} <= {"Submitted", "Returned"}  # a few return at random
    assert crowd.stats.errors == 0


def test_junk_is_seeded_and_reaches_every_field() -> None:
    fields = [(f"rating-{j}", str(j + 1)) for j in range(5)]
    a = control_fields(fields, rng_for(1, "x"))
    assert a == control_fields(fields, rng_for(1, "x"))  # reproducible
    assert all(any(ord(ch) < 32 or ch in "\x7f\ufffe\u202e" for ch in v) for _, v in a)  # every value
    assert any(any(ord(ch) < 32 or ch == "\x7f" for ch in k) for k, _ in a)  # and a field's name
    body = garbage_body("A1", fields, rng_for(1, "y"))
    assert body == garbage_body("A1", fields, rng_for(1, "y"))
    with pytest.raises(UnicodeDecodeError):
        __import__("urllib.parse").parse.unquote_to_bytes(body.decode("ascii")).decode("utf-8")
    assert json.dumps([body.decode("ascii")])  # on the wire it is plain percent-encoded ASCII


def test_honest_fields_keep_an_answer_a_page_holds_in_a_hidden_input() -> None:
    """A ranking page keeps its order in a hidden input: the fields an adversary starts from (and an
    honest participant posts) must keep it, or every ranking answer is 'missing field order'."""
    from campaign.crowd.adversaries import answer_names
    from campaign.crowd.forms import parse_form
    from campaign.crowd.runner import Answerer
    from campaign.tasks import ranking

    items = [ShownItem(f"s{j}", t) for j, t in enumerate(list(TEXTS)[:5])]
    form = parse_form(ranking.page(items, "Water", "Order"))
    assert "order" in form.hidden
    fields = answer_names(form, Answerer(TEXTS).answer(SimWorker("A1", "diligent"), form, rng_for(1, "r")))
    assert [k for k, _ in fields] == ["order"] and len(fields[0][1].split(",")) == 5
