"""A submission completed on Prolific after fewer HITs than its bundle, with the completion code the task
site never gave it (the code is the study's, the same for everyone, and leaks): it is asked to return the
place, not approved at a whole bundle's reward. Returned, its HITs are paid per HIT; not returned within
the study's maximum time, it is approved after all (Prolific allows no rejection for work done) and the
participant is blocked, with an event each time."""

from __future__ import annotations

import sqlite3
import urllib.parse
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from sqlmodel import select

from campaign.marketplaces.base import HitRequest
from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.participant import Participant, add_participant
from campaign.prolific.study import ProlificConfig
from campaign.state import SubmissionStatus
from campaign.store import EventRow
from tests.prolific.support import Stack, adapter_stack, rating_type
from tests.support.http import call_json
from tests.support.market import FORM_PAGE

pytestmark = pytest.mark.prolific


def _configure(url: str, _api: ProlificClient) -> ProlificConfig:
    return ProlificConfig(public_url=url, bundle=3, estimated_minutes=10, maximum_minutes=30, reward=Decimal("1.50"),
                          fee_rate=Decimal("0.3"))


def _one_hit_then_the_leaked_code(st: Stack, p: Participant, study_id: str, code: str) -> tuple[str, str]:
    """Does the one HIT there is (the door then asks to return the place), and completes with `code`."""
    sub, _ = p.start(study_id)
    session = {"PROLIFIC_PID": p.id, "STUDY_ID": study_id, "SESSION_ID": sub}
    step = call_json(f"{st.server.endpoint_url}/prolific/api/next?" + urllib.parse.urlencode(session))
    aid = step["AssignmentId"]
    step = call_json(f"{st.server.endpoint_url}/prolific/api/submit", {**session, "assignmentId": aid, "fields": [["answer", "x"]]})
    assert step["status"] == "return"  # nothing more for them: the site asks for the place back, no code
    assert p.complete(sub, code) == "AWAITING REVIEW"
    return sub, aid


def _stack_with_one_hit(st: Stack) -> tuple[str, str]:
    t = rating_type(st.market)
    st.market.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=1, lifetime=86400, annotation="h", token="h"))
    st.market.refill(t, 1)
    row = st.studies.study(t)
    assert row is not None and row.study_id
    return row.study_id, row.completion_code


def _events(st: Stack, kind: str) -> list[str]:
    with st.store.session() as s:
        return [e.message for e in s.exec(select(EventRow).where(EventRow.campaign == "c", EventRow.kind == kind)).all()]


@pytest.fixture
def short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Stack, Participant, str]]:
    """A study of one HIT in bundles of 3: a participant did the HIT (approved) and completed the place
    with the study's code; yields (the stack, the participant, the submission)."""
    with adapter_stack(tmp_path, _configure) as st:
        monkeypatch.setattr(st.studies, "_now", st.clock.now)
        sid, code = _stack_with_one_hit(st)
        p = add_participant(st.em.root_url, st.em.token)
        sub, aid = _one_hit_then_the_leaked_code(st, p, sid, code)
        st.market.approve(aid)  # the HIT is good: the old code approved the submission at 1.50 here
        yield st, p, sub


def test_a_short_bundle_completed_with_a_leaked_code_is_asked_to_return_and_paid_per_hit(short: tuple[Stack, Participant, str]) -> None:
    st, p, sub = short
    found = st.api.submission(sub)
    assert found["status"] == "AWAITING REVIEW" and found["return_requested"]
    assert len(_events(st, "prolific_return_requested")) == 1
    st.market.settle()
    st.market.settle()  # asked once, not again
    assert len(_events(st, "prolific_return_requested")) == 1
    p.give_back(sub)
    settled = {s.submission_id: s for s in st.market.settle()}
    assert settled[sub].status == SubmissionStatus.RETURNED and settled[sub].work == Decimal("0.50")  # 1.50 / 3
    st.market.pay_work(settled[sub].key, sub, Decimal("0.50"))
    assert st.api.submission(sub)["bonus_payments"] == [50]
    assert st.em.store.charged(what="reward") == (0, 0, 0)  # no reward charged: the place was never approved


def test_a_short_bundle_not_returned_in_time_is_approved_and_its_participant_blocked(short: tuple[Stack, Participant, str],
                                                                                   tmp_path: Path) -> None:
    st, p, sub = short
    st.clock.advance(29 * 60)
    st.market.settle()
    assert st.api.submission(sub)["status"] == "AWAITING REVIEW"  # still within the study's 30 minutes
    st.clock.advance(2 * 60)
    st.market.settle()
    assert st.api.submission(sub)["status"] == "APPROVED"
    assert len(_events(st, "prolific_short_approved")) == 1
    assert st.em.store.charged(what="reward")[0] == 150
    with sqlite3.connect(tmp_path / "market" / "market.db") as db:  # blocked on the task site: no task of the campaign's again
        assert db.execute("SELECT COUNT(*) FROM blocks WHERE worker_id=?", ("AP" + p.id.upper(),)).fetchone()[0] == 1
