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
