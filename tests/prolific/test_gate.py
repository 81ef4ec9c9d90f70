"""The task site admits a participant only on a submission Prolific confirms as theirs and active."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from campaign.clock import ManualClock
from campaign.prolific.checks import (
    CheckCount,
    attention_text,
    checks_needed,
    expected_seconds,
    failing_share,
    seconds_taken,
    too_quick,
)
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
    """Prolific's rules: a submission is rejected only for failed attention checks (as many as the study's
    length requires) or exceptionally fast completion; what quality control decided on single HITs
    (disagreement, spam) never rejects the submission: it is paid and its bad judgments stay out."""
    assert bundle_verdict(["approve", None]).action == "wait"
    assert bundle_verdict([]).action == "wait"
    assert bundle_verdict(["approve", "reject"]).action == "approve"  # mixed work is paid, bad judgments excluded
    assert bundle_verdict(["reject", "reject"]).action == "approve"  # the old LOW_EFFORT rejection for disagreeing: gone
    assert bundle_verdict(["approve", "approve"], CheckCount(2, 1), needed=2).action == "approve"  # one failed: paid
    v = bundle_verdict(["approve", "reject"], CheckCount(3, 2), needed=2)
    assert v.action == "reject" and v.category == "FAILED_CHECK"
    assert v.message is not None and len(v.message) >= 100 and "2 of its 3 attention checks" in v.message
    assert "Thank you" in v.message and v.message.count("Thank you") == 1  # one message, nothing nested in it
    assert bundle_verdict(["approve"], CheckCount(1, 1), needed=checks_needed(4)).category == "FAILED_CHECK"  # short study
    assert checks_needed(5) == 2 and checks_needed(4) == 1
    q = bundle_verdict(["approve"], quick=(20.0, 300.0, Decimal("0.2")))
    assert q.action == "reject" and q.category == "TOO_QUICKLY" and q.message is not None and len(q.message) >= 100
    assert "20 s" in q.message and "5 min 0 s" in q.message
    assert len(rejection_message([])) >= 100


def test_exceptionally_fast_is_against_the_lesser_of_the_estimate_and_the_median() -> None:
    assert expected_seconds(10, []) == 600.0
    assert expected_seconds(10, [300.0, 200.0, 5.0]) == 200.0  # participants are quicker than the estimate
    assert expected_seconds(1, [300.0, 200.0]) == 60.0
    assert too_quick(30.0, 200.0, Decimal("0.2")) and not too_quick(40.0, 200.0, Decimal("0.2"))
    assert not too_quick(0.0, 0.0, Decimal("0.2"))  # everyone as quick: nobody exceptionally so
    assert not too_quick(1.0, 600.0, Decimal("0")) and not too_quick(None, 600.0, Decimal("0.2"))
    assert seconds_taken("2026-11-26T10:00:00Z", "2026-11-26T10:02:30Z") == 150.0
    assert seconds_taken("2026-11-26T10:00:00Z", None) is None


def test_a_trap_on_prolific_says_which_answer_to_give() -> None:
    likert = attention_text("likert", "This sentence is not important.")
    assert likert.startswith("This sentence is not important.") and "attention check" in likert and "rate it 1" in likert
    assert "put it last" in attention_text("ranking", "Barack Obama graduated from Harvard Law.")
    own = "Attention check: select 'Not at all important' here."
    assert attention_text("likert", own) == own  # the researcher's own instruction is kept
    assert attention_text("nuggets", "x") == "x"
    assert places_needed(47, 10) == 5 and places_needed(50, 10) == 5 and places_needed(1, 10) == 1


def test_the_expected_share_of_submissions_failing_their_checks() -> None:
    """`campaign validate`'s expected spend on Prolific: a random spammer fails each check with the
    chance its rating is outside the passing ones, a constant spammer all or none; bundles of 5 HITs, a
    check in 40% of the HITs, two failed needed."""
    assert failing_share({"diligent": 10}, 5, 0.4, 2, 0.6, 0.6, True) == 0.0
    random = 1 - 0.76 ** 5 - 5 * 0.24 * 0.76 ** 4  # P(Binomial(5, 0.4 x 0.6) >= 2)
    constant = 0.6 * (1 - 0.6 ** 5 - 5 * 0.4 * 0.6 ** 4)
    assert abs(failing_share({"random_spammer": 1, "constant_spammer": 1, "diligent": 2}, 5, 0.4, 2, 0.6, 0.6, True)
               - (random + constant) / 4) < 1e-9
    assert abs(failing_share({"constant_spammer": 1}, 5, 0.4, 2, 0.6, 0.6, False) - random) < 1e-9  # each check on its own
    assert failing_share({"random_spammer": 1}, 5, 1.0, 2, 1.0, 1.0, True) == 1.0
