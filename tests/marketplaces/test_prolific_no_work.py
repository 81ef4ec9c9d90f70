"""A Prolific place completed without any work (a leaked completion code): the adapter's sweep rejects it
as NO_CODE, so Prolific never auto-approves and charges it; places with work are unaffected."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from campaign.marketplaces.base import HitRequest
from campaign.prolific.emulator.participant import add_participant
from tests.marketplaces.test_prolific import _do_bundle
from tests.prolific.support import adapter_stack, one_hit_places, rating_type
from tests.support.market import FORM_PAGE

pytestmark = pytest.mark.prolific

DAYS = 86400.0


@pytest.mark.slow
def test_a_place_completed_without_work_is_rejected_and_never_charged(tmp_path: Path) -> None:
    with adapter_stack(tmp_path, one_hit_places) as st:
        m, api = st.market, st.api
        t = rating_type(m)
        for i in range(2):
            m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=1, lifetime=86400, annotation=f"a{i}", token=f"t{i}"))
        assert m.refill(t, 2) == 2
        sid = st.studies.study(t).study_id  # type: ignore[union-attr]
        code = st.studies.study(t).completion_code  # type: ignore[union-attr]
        honest, leech = add_participant(st.em.root_url, st.em.token), add_participant(st.em.root_url, st.em.token)
        h_sub, h_aids = _do_bundle(st.server.endpoint_url, honest, sid, "careful")
        l_sub, _ = leech.start(sid)
        assert leech.complete(l_sub, code) == "AWAITING REVIEW"  # the leaked code, no task ever opened
        assert st.door.assignments_of(l_sub) == []

        settled = {s.submission_id: s.status for s in m.settle()}
        assert settled == {h_sub: "pending", l_sub: "rejected"}
        rejected = api.submission(l_sub)
        assert rejected["status"] == "REJECTED"
        m.approve(h_aids[0])
        assert api.submission(h_sub)["status"] == "APPROVED"

        st.clock.advance(22 * DAYS)  # past Prolific's auto-approval: nothing left for it to approve
        settled = {s.submission_id: s.status for s in m.settle()}
        assert settled == {h_sub: "approved", l_sub: "rejected"}
        rewards, fees, vat = st.em.store.charged(study=sid, what="reward")
        cost = m.place_cost()
        assert Decimal(rewards + fees + vat) / 100 == cost.total  # exactly one place charged: the honest one


def test_a_submission_still_working_or_with_answers_is_not_rejected_as_no_work(tmp_path: Path) -> None:
    with adapter_stack(tmp_path, one_hit_places) as st:
        m = st.market
        t = rating_type(m)
        m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=1, lifetime=86400, annotation="a0", token="t0"))
        assert m.refill(t, 2) == 2
        sid = st.studies.study(t).study_id  # type: ignore[union-attr]
        working = add_participant(st.em.root_url, st.em.token)
        w_sub, _ = working.start(sid)  # ACTIVE, no answer yet: may still work
        assert m.reject_no_work() == []
        assert st.api.submission(w_sub)["status"] == "ACTIVE"
