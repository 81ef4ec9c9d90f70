"""The task site admits a participant only on a submission Prolific confirms as theirs and active."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from campaign.clock import ManualClock
from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.participant import add_participant
from campaign.prolific.emulator.server import start_emulator
from campaign.prolific.gate import ProlificGate, Refused, StudySeat
from campaign.prolific.verdict import bundle_verdict, places_needed, rejection_message

pytestmark = pytest.mark.prolific


def test_gate_against_the_emulator(tmp_path: Path) -> None:
    clock = ManualClock()
    em = start_emulator(tmp_path / "p", clock, fee_rate=Decimal("0.3"))
    try:
        api = ProlificClient(em.base_url, em.token, max_retries=0)
        sid = api.create_study({
            "name": "n", "description": "d", "external_study_url": "https://site.example/p?PID={{%PROLIFIC_PID%}}",
            "prolific_id_option": "url_parameters", "total_available_places": 3, "estimated_completion_time": 5,
            "reward": 100, "completion_codes": [{"code": "DONE1", "code_type": "COMPLETED",
                                                  "actions": [{"action": "MANUALLY_REVIEW"}]}]})["id"]
        api.transition_study(sid, "PUBLISH")
        seat = StudySeat(sid, "HITTYPE", 5, "DONE1")
        calls: list[str] = []

        class Counting:
            def submission(self, sub: str) -> dict:
                calls.append(sub)
                return api.submission(sub)

        gate = ProlificGate(Counting(), lambda s: seat if s == sid else None, ttl=60, clock=clock.now)
        alice, bob = add_participant(em.root_url, em.token), add_participant(em.root_url, em.token)
        a_sub, _ = alice.start(sid)
        adm = gate.admit(alice.id, sid, a_sub)
        assert adm.worker_id == "AP" + alice.id.upper() and adm.seat.redirect().endswith("?cc=DONE1")
        gate.admit(alice.id, sid, a_sub, fresh=False)
        assert calls == [a_sub]  # a read that changes nothing may reuse a recent confirmation
        gate.admit(alice.id, sid, a_sub)
        assert calls == [a_sub, a_sub]  # anything else is confirmed again
        clock.advance(61)
        gate.admit(alice.id, sid, a_sub, fresh=False)
        assert len(calls) == 3  # an old confirmation is not reused
        with pytest.raises(Refused):
            gate.admit(bob.id, sid, a_sub)  # another participant's id with alice's session
        with pytest.raises(Refused):
            gate.admit(alice.id, sid, "f" * 24)  # a made-up session
        with pytest.raises(Refused):
            gate.admit(alice.id, "0" * 24, a_sub)  # a study this site does not serve
        with pytest.raises(Refused):
            gate.admit(alice.id, sid, "../../etc")  # not an id at all
        b_sub, _ = bob.start(sid)
        bob.give_back(b_sub)
        with pytest.raises(Refused):
            gate.admit(bob.id, sid, b_sub)  # returned: no work left
        alice.complete(a_sub, "DONE1")
        with pytest.raises(Refused):
            gate.admit(alice.id, sid, a_sub)  # completed: the session is over, at once
        with pytest.raises(Refused):
            gate.admit(alice.id, sid, a_sub, fresh=False)  # and the refusal dropped what was remembered of it
    finally:
        em.stop()


def test_a_returned_or_timed_out_place_is_refused_at_once(tmp_path: Path) -> None:
    """A confirmation remembered for reads never lets a returned or timed-out place in where it counts."""
    clock = ManualClock()
    em = start_emulator(tmp_path / "p", clock, fee_rate=Decimal("0.3"))
    try:
        api = ProlificClient(em.base_url, em.token, max_retries=0)
        sid = api.create_study({
            "name": "n", "description": "d", "external_study_url": "https://site.example/p?PID={{%PROLIFIC_PID%}}",
            "prolific_id_option": "url_parameters", "total_available_places": 3, "estimated_completion_time": 5,
            "maximum_allowed_time": 20, "reward": 100,
            "completion_codes": [{"code": "DONE1", "code_type": "COMPLETED", "actions": [{"action": "MANUALLY_REVIEW"}]}]})["id"]
        api.transition_study(sid, "PUBLISH")
        seat = StudySeat(sid, "HITTYPE", 5, "DONE1")
        gate = ProlificGate(api, lambda s: seat if s == sid else None, ttl=300, clock=clock.now)
        alice, bob = add_participant(em.root_url, em.token), add_participant(em.root_url, em.token)
        a_sub, _ = alice.start(sid)
        adm = gate.admit(alice.id, sid, a_sub)
        alice.give_back(a_sub)
        with pytest.raises(Refused, match="returned"):
            gate.confirm(adm)
        b_sub, _ = bob.start(sid)
        b_adm = gate.admit(bob.id, sid, b_sub)
        clock.advance(21 * 60)  # past maximum_allowed_time: Prolific times the place out
        with pytest.raises(Refused, match="timed-out"):
            gate.confirm(b_adm)
    finally:
        em.stop()


def test_bundle_verdict_rules() -> None:
    assert bundle_verdict(["approve", None]).action == "wait"
    assert bundle_verdict([]).action == "wait"
    assert bundle_verdict(["approve", "reject"]).action == "approve"  # mixed work is paid, bad judgments excluded
    v = bundle_verdict(["reject", "reject"], ["failed 3 of 3 check statements"] * 2)
    assert v.action == "reject" and v.category == "LOW_EFFORT"
    assert v.message is not None and len(v.message) >= 100 and "failed 3 of 3" in v.message
    assert len(rejection_message([])) >= 100
    assert places_needed(47, 10) == 5 and places_needed(50, 10) == 5 and places_needed(1, 10) == 1
