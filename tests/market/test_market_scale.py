"""What lets the marketplace scale, checked for exactness: the liability counter equals the sum it replaces,
reads run beside a held write lock, the sweep runs only when something is due, and the worker listing
walks only assignable HITs yet returns what a full scan would."""

from __future__ import annotations

import json
import random
import threading
import time
from decimal import Decimal
from pathlib import Path

import pytest

from campaign.clock import ManualClock
from campaign.market import quals as Q
from campaign.market.db import Database
from campaign.market.engine import Engine, WorkerError
from campaign.market.protocol import ApiError
from tests.market.conftest import QUESTION

R = "AKIDSCALE"


def _liability_by_sum(engine: Engine, requester: str) -> int:
    """The formula the counter replaced, evaluated over every HIT at the engine's current time."""
    now = engine.clock.now()
    with engine.db.read() as c:
        row = c.execute(
            "SELECT COALESCE(SUM(unit_cost_cents * CASE WHEN expiration > ? "
            "THEN max_assignments - n_approved - n_rejected ELSE n_accepted + n_submitted END), 0) "
            "FROM hits WHERE requester=? AND disposed=0", (now, requester)).fetchone()
    return int(row[0])


def _counter(engine: Engine, requester: str) -> int:
    engine.handle(requester, "GetAccountBalance", {})  # sweeps if anything is due, like any request
    with engine.db.read() as c:
        return engine._liability_cents(c, requester, engine.clock.now())


@pytest.fixture
def engine(tmp_path: Path):
    db = Database(tmp_path)
    e = Engine(db, ManualClock(1_800_000_000.0), mode="prod", balance=Decimal("100000.00"))
    yield e
    db.close()


def _post(e: Engine, reward: str, n: int, lifetime: int = 3600, quals: list | None = None) -> str:
    t = e.handle(R, "CreateHITType", {"Title": "t", "Description": "d", "Reward": reward, "AssignmentDurationInSeconds": 300,
                                      "AutoApprovalDelayInSeconds": 1800, "QualificationRequirements": quals or []})
    return e.handle(R, "CreateHITWithHITType", {"HITTypeId": t["HITTypeId"], "LifetimeInSeconds": lifetime,
                                                "MaxAssignments": n, "Question": QUESTION})["HIT"]["HITId"]


def test_liability_counter_equals_the_sum_through_a_random_life(engine):
    e, rng = engine, random.Random(5)
    workers = [f"AW{i}" for i in range(12)]
    for w in workers:
        e.worker("register", {"WorkerId": w})
    hits: list[str] = []
    held: list[str] = []  # accepted, not submitted
    submitted: list[str] = []
    for step in range(300):
        action = rng.choice(["post", "post", "accept", "accept", "accept", "submit", "submit", "approve", "reject",
                             "return", "extend", "expire", "more", "time", "dispose", "retype"])
        try:
            if action == "post" or not hits:
                hits.append(_post(e, rng.choice(["0.05", "0.10", "0.50"]), rng.choice([1, 3, 10]), rng.choice([600, 3600])))
            elif action == "accept":
                a = e.worker("accept", rng.choice(workers), rng.choice(hits))
                held.append(a["AssignmentId"])
            elif action == "submit" and held:
                aid = held.pop(rng.randrange(len(held)))
                e.worker("submit", aid, [("assignmentId", aid), ("x", "1")])
                submitted.append(aid)
            elif action == "return" and held:
                e.worker("return", held.pop(rng.randrange(len(held))))
            elif action in ("approve", "reject") and submitted:
                aid = submitted.pop(rng.randrange(len(submitted)))
                if action == "approve":
                    e.handle(R, "ApproveAssignment", {"AssignmentId": aid})
                else:
                    e.handle(R, "RejectAssignment", {"AssignmentId": aid, "RequesterFeedback": "no"})
            elif action == "extend":
                e.handle(R, "UpdateExpirationForHIT", {"HITId": rng.choice(hits), "ExpireAt": e.clock.now() + rng.choice([60, 7200])})
            elif action == "expire":
                e.handle(R, "UpdateExpirationForHIT", {"HITId": rng.choice(hits), "ExpireAt": 0})
            elif action == "more":
                e.handle(R, "CreateAdditionalAssignmentsForHIT", {"HITId": rng.choice(hits), "NumberOfAdditionalAssignments": 1})
            elif action == "dispose":
                e.handle(R, "DeleteHIT", {"HITId": rng.choice(hits)})
            elif action == "retype":
                t = e.handle(R, "CreateHITType", {"Title": "t2", "Description": "d", "Reward": rng.choice(["0.07", "0.30"]),
                                                  "AssignmentDurationInSeconds": 300})
                e.handle(R, "UpdateHITTypeOfHIT", {"HITId": rng.choice(hits), "HITTypeId": t["HITTypeId"]})
            elif action == "time":
                e.clock.advance(rng.choice([30, 400, 2000]))
        except (ApiError, WorkerError):
            pass  # refusals are part of a random life; they must change nothing, which the equality checks too
        assert _counter(e, R) == _liability_by_sum(e, R), (step, action)
    assert _liability_by_sum(e, R) > 0


def test_reads_do_not_wait_for_a_held_write_lock(engine):
    e = engine
    _post(e, "0.10", 2)
    e.worker("register", {"WorkerId": "AREADER"})
    e.handle(R, "ListHITs", {})  # the first request sweeps and learns when the next transition is due
    holding, release = threading.Event(), threading.Event()

    def writer() -> None:
        with e.db.transaction():
            holding.set()
            release.wait(10)

    t = threading.Thread(target=writer)
    t.start()
    try:
        assert holding.wait(5)
        started = time.monotonic()
        assert e.handle(R, "ListHITs", {"MaxResults": 10})["NumResults"] == 1
        assert len(e.worker("available", "AREADER", 10)) == 1
        assert e.handle(R, "GetAccountBalance", {})["AvailableBalance"] == "100000.00"
        assert time.monotonic() - started < 2
    finally:
        release.set()
        t.join()


def test_sweep_runs_only_when_something_is_due(engine, monkeypatch):
    e = engine
    hit = _post(e, "0.10", 2, lifetime=600)
    e.worker("register", {"WorkerId": "ASLOW"})
    aid = e.worker("accept", "ASLOW", hit)["AssignmentId"]  # deadline in 300 s
    calls = []
    original = Engine._sweep

    def counting(self, c, now):
        calls.append(now)
        return original(self, c, now)

    monkeypatch.setattr(Engine, "_sweep", counting)
    for _ in range(5):
        e.handle(R, "ListHITs", {})
        e.worker("available", "ASLOW", 10)
    assert calls == []  # nothing due: reads take the read path, no sweep at all
    e.clock.advance(301)
    got = e.handle(R, "GetHIT", {"HITId": hit})["HIT"]
    assert len(calls) == 1 and got["NumberOfAssignmentsPending"] == 0  # abandoned by the sweep this read caused
    with pytest.raises(WorkerError):
        e.worker("submit", aid, [("assignmentId", aid)])
    e.clock.advance(300)  # the HIT's expiration
    assert e.handle(R, "GetHIT", {"HITId": hit})["HIT"]["HITStatus"] == "Reviewable"
    with e.db.read() as c:
        assert c.execute("SELECT live FROM hits WHERE id=?", (hit,)).fetchone()[0] == 0


def test_worker_listing_matches_a_full_scan(engine):
    """Listing through the index returns exactly what filtering every HIT by hand gives, in order."""
    e, rng = engine, random.Random(9)
    e.mode = "sandbox"
    qt = e.handle(R, "CreateQualificationType", {"Name": "q", "Description": "d", "QualificationTypeStatus": "Active"})
    qid = qt["QualificationType"]["QualificationTypeId"]
    guarded = [{"QualificationTypeId": qid, "Comparator": "Exists", "ActionsGuarded": "DiscoverPreviewAndAccept"}]
    hits = [_post(e, "0.05", rng.choice([1, 2]), rng.choice([600, 3600]), guarded if rng.random() < 0.2 else None)
            for _ in range(120)]
    for w in ("AONE", "ATWO", "ATHREE"):
        e.worker("register", {"WorkerId": w})
    e.handle(R, "AssociateQualificationWithWorker", {"QualificationTypeId": qid, "WorkerId": "ATWO", "IntegerValue": 1})
    e.handle("AKIDOTHER", "CreateWorkerBlock", {"WorkerId": "ATHREE", "Reason": "x"})  # someone else's block: no effect
    for h in rng.sample(hits, 60):
        try:
            e.worker("accept", rng.choice(["AONE", "ATWO"]), h)
        except WorkerError:
            pass
    for h in rng.sample(hits, 10):
        e.handle(R, "UpdateExpirationForHIT", {"HITId": h, "ExpireAt": 0})
    e.clock.advance(700)  # the 600 s HITs expire; accepted work is abandoned (300 s)

    def by_hand(w: str) -> list[str]:
        out = []
        now = e.clock.now()
        for h in hits:
            got = e.handle(R, "GetHIT", {"HITId": h})["HIT"]
            reqs = got["QualificationRequirements"]
            mine = e.handle(R, "ListAssignmentsForHIT", {"HITId": h})["Assignments"]
            if got["HITStatus"] != "Assignable" or got["Expiration"] <= now:
                continue
            if reqs and not Q.allowed(reqs, {qid: 1} if w == "ATWO" else {}, "discover"):
                continue
            if any(a["WorkerId"] == w for a in mine):
                continue
            out.append(h)
        return out

    for w in ("AONE", "ATWO", "ATHREE"):
        listed = [x["HITId"] for x in e.worker("available", w, 1000)]
        assert listed == by_hand(w), w
        assert [x["HITId"] for x in e.worker("available", w, 7)] == listed[:7]
    e.handle(R, "CreateWorkerBlock", {"WorkerId": "AONE", "Reason": "x"})
    assert e.worker("available", "AONE", 1000) == []
    assert json.dumps(e.worker("available", "ATWO", 3))  # plain JSON for the worker API
