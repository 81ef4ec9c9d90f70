"""Alerts: the pure rules, and `raise_alerts` writing each alert once as an event (again only after it
cleared), on stores built by hand."""

from __future__ import annotations

import json
import time
from decimal import Decimal

from sqlmodel import select

from campaign import ledger
from campaign.readmodel.alerts import AlertInput, agreement_drop, compute_alerts, error_burst
from campaign.readmodel.heartbeat import ACK_KIND, record_heartbeat
from campaign.readmodel.snapshot import Reader
from campaign.steps.alerts import EVENT_KIND, raise_alerts
from campaign.store import AssignmentRow, CampaignRow, EventRow, HitRow, Store, WorkerRow

DAY = 86400.0


def keys(alerts) -> set[str]:
    return {a.key for a in alerts}


def test_budget_thresholds():
    base = dict(campaign="c", status="running", budget=Decimal("10.00"))
    assert keys(compute_alerts(AlertInput(committed=Decimal("7.99"), **base))) == set()
    assert keys(compute_alerts(AlertInput(committed=Decimal("8.00"), **base))) == {"budget80"}
    assert keys(compute_alerts(AlertInput(committed=Decimal("10.00"), **base))) == {"budget100"}


def test_review_deadline_margin_and_late():
    base = dict(campaign="c", status="running", budget=Decimal("10"), committed=Decimal("0"), clock_now=1000.0)
    delay = 4 * 3600.0
    ok = compute_alerts(AlertInput(review_deadlines=[("likert", 1000.0 + delay / 2, delay)], **base))
    behind = compute_alerts(AlertInput(review_deadlines=[("likert", 1000.0 + delay / 8, delay)], **base))
    late = compute_alerts(AlertInput(review_deadlines=[("likert", 999.0, delay)], **base))
    assert keys(ok) == set()
    assert keys(behind) == {"review_behind:likert"} and "30m" in behind[0].message
    assert keys(late) == {"review_late:likert"}
    finished = dict(base, status="finished")
    assert keys(compute_alerts(AlertInput(review_deadlines=[("likert", 999.0, delay)], **finished))) == set()


def test_agreement_drop_needs_enough_answers_and_a_real_drop():
    series = [0.8, None, 0.82, 0.79, 0.81, 0.8, 0.8, 0.8, 0.8, 0.8, 0.2, 0.3]
    few = [5, 0, 5, 5, 5, 5, 0, 0, 0, 0, 1, 2]  # only 3 recent answers: one early spammer is not a trend
    assert agreement_drop(series, few) is None
    many = [5, 0, 5, 5, 5, 5, 0, 0, 0, 0, 6, 6]
    before, now = agreement_drop(series, many)
    assert round(before, 3) == round((0.8 + 0.82 + 0.79 + 0.81 + 0.8) / 5, 3) and round(now, 3) == 0.25
    noise = [0.8, None, 0.82, 0.79, 0.81, 0.8, 0.8, 0.8, 0.8, 0.8, 0.7, 0.75]
    assert agreement_drop(noise, many) is None


def test_error_burst_counts_only_the_window():
    now = 10_000.0
    assert error_burst([now - 5] * 4, now) == 0
    assert error_burst([now - 5] * 5, now) == 5
    assert error_burst([now - 120] * 9, now) == 0


def make_store(tmp_path, budget="10.00") -> Store:
    store = Store.open(tmp_path)
    spec = {"name": "c1", "poll_interval": 0.5, "stages": [{"name": "likert", "kind": "likert", "auto_approval_delay": DAY}]}
    with store.session() as s:
        s.add(CampaignRow(name="c1", fingerprint="f", spec_json=json.dumps(spec), budget=budget))
    return store


def reserve(store: Store, key: str, budget: str = "10.00", reward: str = "0.06", n: int = 5) -> None:
    with store.session() as s:
        s.add(HitRow(campaign="c1", stage="likert", hit_key=key, item_keys="[]", annotation=key, token=key, status="posted",
                     reward=reward, assignments=n))
        ledger.reserve_hit(s, "c1", Decimal(budget), key, Decimal(reward), n)


def alert_events(store: Store) -> list[EventRow]:
    with store.session() as s:
        return list(s.exec(select(EventRow).where(EventRow.campaign == "c1", EventRow.kind == EVENT_KIND).order_by(EventRow.id)).all())


def test_raise_alerts_writes_each_alert_once_and_again_after_it_cleared(tmp_path):
    store = make_store(tmp_path, budget="2.00")
    for i in range(4):  # 4 x $0.35 = $1.40 of $2.00: 70%
        reserve(store, f"h{i}", budget="2.00")
    assert raise_alerts(store, "c1") == []
    reserve(store, "h4", budget="2.00")  # $1.75: 87.5%
    new = raise_alerts(store, "c1")
    assert keys(new) == {"budget80"}
    assert raise_alerts(store, "c1") == [] and raise_alerts(store, "c1") == []
    assert [e.subject for e in alert_events(store)] == ["budget80"]
    with store.session() as s:  # released: back under 80%, the alert clears
        ledger.release_hit_rest(s, "c1", "h4")
        ledger.release_hit_rest(s, "c1", "h3")
    assert raise_alerts(store, "c1") == []
    reserve(store, "h5", budget="2.00")
    reserve(store, "h6", budget="2.00")
    assert keys(raise_alerts(store, "c1")) == {"budget80"}  # it came back: a new event
    ev = alert_events(store)
    assert [e.subject for e in ev] == ["budget80", "budget80"] and ev[0].level == "warning"
    store.close()


def test_raise_alerts_review_behind_auto_approval_and_error_burst(tmp_path):
    store = make_store(tmp_path)
    reserve(store, "h0")
    clock_now = 1_800_000_000.0
    record_heartbeat(store, "c1", "running", clock_now=clock_now, speed=1.0)
    with store.session() as s:  # submitted 23 h ago (clock), unreviewed: auto-approved in 1 h of a 24 h delay
        s.add(AssignmentRow(assignment_id="A1", campaign="c1", stage="likert", hit_key="h0", hit_id="H", worker_id="W1",
                            answer_xml="", submit_time=clock_now - 23 * 3600, collected_at=clock_now - 23 * 3600))
    new = raise_alerts(store, "c1")
    assert keys(new) == {"review_behind:likert"}
    for _ in range(5):
        store.event("c1", "marketplace_error", "collecting h0: ServiceUnavailable", level="warning")
    assert keys(raise_alerts(store, "c1")) == {"market_errors"}
    assert keys(raise_alerts(store, "c1")) == set()
    assert sorted(e.subject for e in alert_events(store)) == ["market_errors", "review_behind:likert"]
    store.close()


def test_raise_alerts_agreement_drop_from_the_work_of_new_workers(tmp_path):
    """Early answers come from workers who agree with the rest (r 0.8), the newest from one who does not."""
    store = make_store(tmp_path)
    reserve(store, "h0")
    clock_now = 1_800_000_000.0
    record_heartbeat(store, "c1", "running", clock_now=clock_now, speed=1.0)
    with store.session() as s:
        for k in range(60):
            late = k >= 45  # 15 answers in the last 40 minutes, from one worker who does not agree
            w = "late" if late else f"W{k % 4}"
            t = clock_now - 2400 + (k - 45) * 150 if late else clock_now - 6 * 3600 + k * 360
            s.add(AssignmentRow(assignment_id=f"A{k}", campaign="c1", stage="likert", hit_key="h0", hit_id="H", worker_id=w,
                                status="approved", answer_xml="", submit_time=t, collected_at=t))
        for k in range(4):
            s.add(WorkerRow(campaign="c1", worker_id=f"W{k}", evidence=json.dumps({"correlation": 0.8, "labels": 45})))
        s.add(WorkerRow(campaign="c1", worker_id="late", evidence=json.dumps({"correlation": 0.05, "labels": 20})))
    new = raise_alerts(store, "c1")
    assert keys(new) == {"agreement_drop:likert"}
    assert "0.80 -> 0.05" in new[0].message
    store.close()


def test_heartbeat_acknowledges_each_change_of_status_once(tmp_path):
    store = make_store(tmp_path)
    assert record_heartbeat(store, "c1", "running", clock_now=1.0) is False  # the first beat: nothing to acknowledge
    assert record_heartbeat(store, "c1", "running", clock_now=2.0) is False
    assert record_heartbeat(store, "c1", "paused", clock_now=3.0) is True
    assert record_heartbeat(store, "c1", "paused", clock_now=4.0) is False
    assert record_heartbeat(store, "c1", "running", clock_now=5.0) is True
    with store.session() as s:
        acks = s.exec(select(EventRow.message).where(EventRow.kind == ACK_KIND).order_by(EventRow.id)).all()
    assert len(acks) == 2 and "paused" in acks[0] and acks[1] == "daemon: running"
    store.close()


def test_liveness_follows_the_heartbeat(tmp_path):
    from campaign.readmodel.snapshot import Reader

    store = make_store(tmp_path)
    now = time.time()
    record_heartbeat(store, "c1", "running", clock_now=5000.0, speed=60.0, wall=now - 2)
    v = Reader(store).campaign("c1", now)
    assert v.live.live and abs(v.clock_now - (5000.0 + 2 * 60.0)) < 1e-6
    v = Reader(store).campaign("c1", now + 600)
    assert not v.live.live and "NO DAEMON" in v.live.message
    assert v.clock_now == 5000.0  # a stopped daemon's clock does not move
    store.close()


def test_a_study_whose_ledger_differs_from_the_service_is_an_error_alert_even_when_finished():
    """Money that does not reconcile stays an alert after the campaign finished: it is about what was paid."""
    figures = {"study": "S1", "booked": "19.88", "charged": "18.97"}
    base = dict(campaign="c", status="finished", budget=Decimal("60"), committed=Decimal("19.88"), currency="GBP")
    [alert] = compute_alerts(AlertInput(cost_mismatches=[("T1", figures)], **base))
    assert alert.key == "cost_mismatch:T1" and alert.level == "error"
    assert "19.88" in alert.message and "18.97" in alert.message and "£" in alert.message
    assert compute_alerts(AlertInput(**base)) == []


def same_alerts(kept: Reader, store: Store, now: float) -> list:
    """The kept Reader's alerts, checked against a fresh Reader's (alerts only, and the full view)."""
    got = kept.alerts("c1", now)
    fresh = Reader(store)
    assert [(a.key, a.message) for a in got] == [(a.key, a.message) for a in fresh.alerts("c1", now)]
    assert [(a.key, a.message) for a in got] == [(a.key, a.message) for a in Reader(store).campaign("c1", now).alerts]
    kept_arrivals, fresh_arrivals = kept._arrivals["c1"], fresh._arrivals["c1"]
    assert kept_arrivals.count == fresh_arrivals.count
    for a, b in zip(kept_arrivals.arrays(), fresh_arrivals.arrays()):
        assert sorted(a.tolist()) == sorted(b.tolist())
    return got


def test_a_reader_kept_across_passes_raises_and_clears_alerts_as_a_fresh_one(tmp_path):
    """The daemon keeps one Reader per campaign from pass to pass: each alert is written once when its
    condition appears and again only after it cleared, and every pass's alerts and answer arrays equal
    those of a Reader made for that pass."""
    store = make_store(tmp_path, budget="2.00")
    reserve(store, "h0", budget="2.00")
    clock_now = 1_800_000_000.0
    kept = Reader(store)

    def run(now_clock: float) -> set[str]:
        record_heartbeat(store, "c1", "running", clock_now=now_clock, speed=1.0)
        now = time.time()
        standing = keys(same_alerts(kept, store, now))
        return keys(raise_alerts(store, "c1", now=now, reader=kept)) | {f"standing:{k}" for k in standing}

    assert run(clock_now) == set()
    with store.session() as s:  # an answer submitted 23 h ago, unreviewed: auto-approved within the hour
        s.add(AssignmentRow(assignment_id="A1", campaign="c1", stage="likert", hit_key="h0", hit_id="H", worker_id="W0",
                            answer_xml="", submit_time=clock_now - 23 * 3600, collected_at=clock_now - 23 * 3600))
    assert run(clock_now) == {"review_behind:likert", "standing:review_behind:likert"}
    assert run(clock_now + 60) == {"standing:review_behind:likert"}  # standing: no second event
    with store.session() as s:  # reviewed: the alert clears
        row = s.get(AssignmentRow, "A1")
        row.status = "approved"
        s.add(row)
    assert run(clock_now + 120) == set()
    for i in range(1, 5):  # 5 x $0.35 of $2.00: 87.5% committed
        reserve(store, f"h{i}", budget="2.00")
    assert run(clock_now + 180) == {"budget80", "standing:budget80"}
    with store.session() as s:
        ledger.release_hit_rest(s, "c1", "h4")
    assert run(clock_now + 240) == set()
    # answers arriving over the next hours, the newest from a worker who does not agree with the rest;
    # one of them stored late with a time long before the newest (the kept arrays are read afresh)
    with store.session() as s:
        for k in range(60):
            late = k >= 45
            t = clock_now + 600 + (6 * 3600 - 2400) + (k - 45) * 150 if late else clock_now + 600 + k * 360
            s.add(AssignmentRow(assignment_id=f"B{k}", campaign="c1", stage="likert", hit_key="h0", hit_id="H",
                                worker_id="late" if late else f"W{k % 4}", status="approved", answer_xml="",
                                submit_time=t, collected_at=t))
        for k in range(4):
            s.add(WorkerRow(campaign="c1", worker_id=f"W{k}", evidence=json.dumps({"correlation": 0.8, "labels": 45})))
        s.add(WorkerRow(campaign="c1", worker_id="late", evidence=json.dumps({"correlation": 0.05, "labels": 20})))
    end = clock_now + 600 + 6 * 3600
    assert run(end) == {"agreement_drop:likert", "standing:agreement_drop:likert"}
    with store.session() as s:
        s.add(AssignmentRow(assignment_id="EARLY", campaign="c1", stage="likert", hit_key="h0", hit_id="H", worker_id="W1",
                            status="approved", answer_xml="", submit_time=clock_now + 700, collected_at=clock_now + 700))
        late = s.exec(select(WorkerRow).where(WorkerRow.worker_id == "late")).one()
        late.evidence = json.dumps({"correlation": 0.78, "labels": 20})  # the late worker now agrees: the drop clears
        s.add(late)
    assert run(end + 60) == set()
    assert kept._arrivals["c1"].count == 62
    assert list(kept._evidence) == ["c1"] and len(kept._arrivals["c1"].worker_names) == 5  # one row a worker, however often it changed
    assert [e.subject for e in alert_events(store)] == ["review_behind:likert", "budget80", "agreement_drop:likert"]
    store.close()


def test_a_kept_reader_holds_the_ids_of_recent_answers_only(tmp_path):
    """What a Reader keeps per answer from pass to pass: its time, stage and worker in typed arrays; the
    ids only of answers within the re-read margin before the newest (the ones a next read returns again)."""
    store = make_store(tmp_path)
    reserve(store, "h0")
    clock_now = 1_800_000_000.0
    record_heartbeat(store, "c1", "running", clock_now=clock_now, speed=1.0)
    kept = Reader(store)
    for batch in range(5):
        with store.session() as s:
            for k in range(200):
                t = clock_now - 5 * 3600 + batch * 3600 + k * 10
                s.add(AssignmentRow(assignment_id=f"A{batch}-{k}", campaign="c1", stage="likert", hit_key="h0", hit_id="H",
                                    worker_id=f"W{k % 7}", status="approved", answer_xml="", submit_time=t, collected_at=t))
        same_alerts(kept, store, time.time())
    arrivals = kept._arrivals["c1"]
    assert arrivals.count == 1000
    assert len(arrivals._recent) <= 3  # margin max(1 s, 2 x speed) = 2 s of campaign clock before the newest
