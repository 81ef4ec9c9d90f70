"""Slots added to a posted HIT on Prolific (`ProlificMarketplace.add_assignments`, used by the replace step
under `quality.replace_excluded`): the task site's HIT gets them once per token, and the study then wants
the places they need, never more after a repeated call."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import select

from campaign.marketplaces.base import AdditionalAssignments, AlreadyDone, HitRequest
from campaign.prolific.emulator.participant import ParticipantError, add_participant
from campaign.store import HitRow, ProlificPostedRow
from tests.marketplaces.test_prolific import _do_bundle
from tests.prolific.support import adapter_stack, one_hit_places, rating_type
from tests.support.market import FORM_PAGE

pytestmark = pytest.mark.prolific


def _slots_in_store(st, hit_id: str, n: int) -> None:
    """What the replace step writes before its call: the HIT's raised slot count."""
    with st.store.session() as s:
        row = s.exec(select(HitRow).where(HitRow.campaign == "c", HitRow.hit_id == hit_id)).first()
        if row is None:
            row = HitRow(campaign="c", stage="likert", hit_key="likert-00000", batch=0, item_keys="[]", annotation="a0",
                         token="t0", token_attempt=0, status="posted", reward="0.10", assignments=n, reserved="0.00",
                         hit_id=hit_id)
        row.assignments = n
        s.add(row)


def _posted(st, hit_id: str) -> int:
    with st.store.session() as s:
        return s.exec(select(ProlificPostedRow.assignments).where(ProlificPostedRow.hit_id == hit_id)).one()


def test_added_slots_reach_the_task_site_and_the_places_wanted_once(tmp_path: Path) -> None:
    with adapter_stack(tmp_path, one_hit_places) as st:
        m = st.market
        assert isinstance(m, AdditionalAssignments)
        t = rating_type(m)
        hit = m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=1, lifetime=86400, annotation="a0", token="t0"))
        assert m.refill(t, 1) == 1
        sid = st.studies.study(t).study_id  # type: ignore[union-attr]
        first = add_participant(st.em.root_url, st.em.token)
        _, aids = _do_bundle(st.server.endpoint_url, first, sid, "x")
        assert len(aids) == 1
        assert m.places_wanted()[t] == 1  # the one slot is held: no place more

        second = add_participant(st.em.root_url, st.em.token)  # someone the study reaches who has not taken part
        _slots_in_store(st, hit.hit_id, 2)
        m.add_assignments(hit.hit_id, 1, "t0-extra-1")
        assert _posted(st, hit.hit_id) == 2
        assert m.places_wanted()[t] == 2  # a place for the new slot
        with pytest.raises(AlreadyDone):  # a retry after a crash: nothing added, the count set again, not raised
            m.add_assignments(hit.hit_id, 1, "t0-extra-1")
        assert _posted(st, hit.hit_id) == 2
        assert m.places_wanted()[t] == 2

        assert m.refill(t, 2) == 2
        _, aids = _do_bundle(st.server.endpoint_url, second, sid, "y")
        assert len(aids) == 1  # the new slot is served to someone else
        third = add_participant(st.em.root_url, st.em.token)
        with pytest.raises(ParticipantError):  # two places, both taken: no third
            third.start(sid)
        assert m.places_wanted()[t] == 2


def test_the_study_count_follows_the_store_after_a_crash_between_the_calls(tmp_path: Path) -> None:
    """The task site added the slots, then the adapter died before the study's count was written: the
    replace step's repeat (same token) gets AlreadyDone and the count is written then."""
    with adapter_stack(tmp_path, one_hit_places) as st:
        m = st.market
        t = rating_type(m)
        hit = m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=2, lifetime=86400, annotation="a0", token="t0"))
        _slots_in_store(st, hit.hit_id, 4)
        m.inner.add_assignments(hit.hit_id, 2, "t0-extra-1")  # type: ignore[attr-defined]
        assert _posted(st, hit.hit_id) == 2
        with pytest.raises(AlreadyDone):
            m.add_assignments(hit.hit_id, 2, "t0-extra-1")
        assert _posted(st, hit.hit_id) == 4
