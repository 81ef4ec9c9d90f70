"""A bundle the task site cannot fill: the participant is asked to return the place (no completion code,
which is a whole bundle's reward) and the HITs of it the quality policy approved are paid per HIT, as a
bonus to the returned submission, once; the study is not over until that is paid."""

from __future__ import annotations

import urllib.parse
from decimal import Decimal
from pathlib import Path

import pytest

from campaign.marketplaces.base import HitRequest
from campaign.prolific.emulator.participant import add_participant
from campaign.prolific.study import ProlificConfig, work_pay
from tests.prolific.support import adapter_stack, one_hit_places, rating_type
from tests.support.http import call_json
from tests.support.market import FORM_PAGE

pytestmark = pytest.mark.prolific


def test_work_pay_is_the_rewards_share_per_hit() -> None:
    cfg = ProlificConfig(public_url="https://x", bundle=5, estimated_minutes=5, reward=Decimal("0.75"))
    assert [work_pay(cfg, k) for k in range(6)] == [Decimal(x) for x in ("0.00", "0.15", "0.30", "0.45", "0.60", "0.75")]


@pytest.mark.slow
def test_a_shorter_bundle_is_returned_and_its_approved_hits_paid_once(tmp_path: Path) -> None:
    cfg = lambda url, _api: ProlificConfig(public_url=url, bundle=3, estimated_minutes=10,  # noqa: E731
                                           reward=Decimal("1.50"), fee_rate=Decimal("0.3"))
    with adapter_stack(tmp_path, cfg) as st:
        m, api = st.market, st.api
        t = rating_type(m)
        for i in range(2):  # two HITs for a bundle of three: nobody can complete a bundle
            m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=1, lifetime=86400, annotation=f"a{i}", token=f"t{i}"))
        assert m.refill(t, 1) == 1
        sid = st.studies.study(t).study_id  # type: ignore[union-attr]
        p = add_participant(st.em.root_url, st.em.token)
        sub, _ = p.start(sid)
        session = {"PROLIFIC_PID": p.id, "STUDY_ID": sid, "SESSION_ID": sub}
        site = st.server.endpoint_url
        step = call_json(f"{site}/prolific/api/next?" + urllib.parse.urlencode(session))
        aids = []
        while step["status"] == "task":
            aids.append(step["AssignmentId"])
            step = call_json(f"{site}/prolific/api/submit", {**session, "assignmentId": step["AssignmentId"], "fields": [["answer", "x"]]})
        assert len(aids) == 2 and step["status"] == "return" and "redirect" not in step
        assert p.give_back(sub) == "RETURNED"

        m.approve(aids[0])
        assert [s.work for s in m.settle() if s.submission_id == sub] == [None]  # one HIT undecided: nothing owed yet
        assert m.stop(t) is False  # its work may still be paid: the study is not over
        m.reject(aids[1], "no")
        owed = [s.work for s in m.settle() if s.submission_id == sub]
        assert owed == [Decimal("0.50")]  # 1.50 / 3 for the one approved HIT
        assert m.stop(t) is False  # owed, not paid yet
        cost = m.pay_work(t, sub, Decimal("0.50"))
        assert m.pay_work(t, sub, Decimal("0.50")) == cost  # asked again (a crash before the ledger's record): paid once
        assert api.submission(sub)["bonus_payments"] == [50]
        rewards, fees, vat = st.em.store.charged(study=sid)
        assert Decimal(rewards + fees + vat) / 100 == cost.total == Decimal("0.65")  # no reward: the place was returned
        assert m.stop(t) is True


@pytest.mark.slow
def test_a_stopped_study_is_never_given_places_again(tmp_path: Path) -> None:
    """Raising a stopped study's places makes it active on Prolific again: participants would take places
    that no work follows (the door asks each to return, and they come back, round after round)."""
    with adapter_stack(tmp_path, one_hit_places) as st:
        m, api = st.market, st.api
        t = rating_type(m)
        m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=2, lifetime=86400, annotation="a0", token="t0"))
        assert m.places_wanted() == {t: 2} and m.refill(t, 2) == 2
        assert m.stop(t) is True
        sid = st.studies.study(t).study_id  # type: ignore[union-attr]
        m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=3, lifetime=86400, annotation="a1", token="t1"))
        assert m.places_wanted() == {t: 2}
        assert api.study(sid)["status"] == "COMPLETED"
