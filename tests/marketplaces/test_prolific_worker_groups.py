"""Worker groups on Prolific are the task site's: a HIT type that shuts a group out is never served to its
members through the door (they are asked to return the place), while everyone else gets its tasks. And
free work that nobody the study reaches may be given is found (`UnservableWork`)."""

from __future__ import annotations

import urllib.parse
from decimal import Decimal
from pathlib import Path

import pytest

from campaign.marketplaces.base import HitRequest, HitType, UnservableWork, WorkerGroups
from campaign.prolific.emulator.participant import add_participant
from campaign.prolific.gate import site_worker_id
from campaign.spec import Qualifications
from tests.marketplaces.test_prolific import _do_bundle
from tests.prolific.support import adapter_stack, one_hit_places, rating_type
from tests.support.http import call_json
from tests.support.market import FORM_PAGE

pytestmark = pytest.mark.prolific


def test_a_participant_in_a_shut_out_group_gets_no_task_of_that_type(tmp_path: Path) -> None:
    with adapter_stack(tmp_path, one_hit_places) as st:
        m = st.market
        assert isinstance(m, WorkerGroups)
        base = dict(description="D", reward=Decimal("0.10"), duration=600, auto_approval_delay=86400, keywords="k",
                    qualifications=Qualifications())
        first = m.create_hit_type(HitType(title="Rate", **base), sandbox=True)
        m.create_hit(first, HitRequest(html=FORM_PAGE, max_assignments=2, lifetime=86400, annotation="a0", token="t0"))
        assert m.refill(first, 2) == 2
        spammer, honest = add_participant(st.em.root_url, st.em.token), add_participant(st.em.root_url, st.em.token)
        for p in (spammer, honest):
            _do_bundle(st.server.endpoint_url, p, st.studies.study(first).study_id, "x")  # type: ignore[union-attr]

        gid = m.worker_group("campaign c 0123abcd excluded workers")
        assert m.worker_group("campaign c 0123abcd excluded workers") == gid  # found again by its name
        m.add_to_group(gid, site_worker_id(spammer.id))
        m.add_to_group(gid, site_worker_id(spammer.id))  # twice: harmless
        later = m.create_hit_type(HitType(title="Order", **base, excluded_groups=(gid,)), sandbox=True)
        m.create_hit(later, HitRequest(html=FORM_PAGE, max_assignments=2, lifetime=86400, annotation="b0", token="u0"))
        assert m.refill(later, 2) == 2
        sid = st.studies.study(later).study_id  # type: ignore[union-attr]

        sub, _ = spammer.start(sid)
        session = {"PROLIFIC_PID": spammer.id, "STUDY_ID": sid, "SESSION_ID": sub}
        step = call_json(f"{st.server.endpoint_url}/prolific/api/next?" + urllib.parse.urlencode(session))
        assert step["status"] == "return"  # nothing of this study for them: the place goes back
        _, aids = _do_bundle(st.server.endpoint_url, honest, sid, "y")
        assert len(aids) == 1


def test_free_slots_nobody_eligible_may_take_are_unservable_once_everyone_took_part(tmp_path: Path) -> None:
    with adapter_stack(tmp_path, one_hit_places) as st:
        m = st.market
        assert isinstance(m, UnservableWork)
        t = rating_type(m)
        hit = m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=3, lifetime=86400, annotation="a0", token="t0"))
        assert m.refill(t, 3) == 3
        sid = st.studies.study(t).study_id  # type: ignore[union-attr]
        people = [add_participant(st.em.root_url, st.em.token) for _ in range(3)]  # everyone the study reaches
        assert m.unservable() == []  # nobody came yet
        leech = people.pop()  # takes a place and completes it at once with a leaked code, never on the task site
        l_sub, _ = leech.start(sid)
        leech.complete(l_sub, st.studies.study(t).completion_code)  # type: ignore[union-attr]
        assert {s.submission_id: s.status for s in m.settle()}[l_sub] == "rejected"
        _do_bundle(st.server.endpoint_url, people[0], sid, "x")
        assert m.unservable() == []  # someone it reaches has not taken part
        p = people[1]
        sub, _ = p.start(sid)
        session = {"PROLIFIC_PID": p.id, "STUDY_ID": sid, "SESSION_ID": sub}
        step = call_json(f"{st.server.endpoint_url}/prolific/api/next?" + urllib.parse.urlencode(session))
        assert step["status"] == "task"
        assert m.unservable() == []  # working on it now
        call_json(f"{st.server.endpoint_url}/prolific/api/submit", {**session, "assignmentId": step["AssignmentId"], "fields": [["answer", "y"]]})
        step = call_json(f"{st.server.endpoint_url}/prolific/api/next?" + urllib.parse.urlencode(session))
        assert p.complete_from_redirect(sub, step["redirect"]) == "AWAITING REVIEW"
        # both did the HIT, and the one the study rejected is not counted on: its third slot can go to nobody
        assert m.unservable() == [hit.hit_id]
