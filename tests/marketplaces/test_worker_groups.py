"""Worker groups on the MTurk implementation (requester qualification types), against the built-in
marketplace in-process: idempotent by name, and a HIT type that shuts a group out keeps its members out."""

from __future__ import annotations

from decimal import Decimal

import pytest

from campaign.market.worker_client import WorkerAPIError
from campaign.marketplaces.base import HitRequest, HitType, WorkerGroups
from campaign.spec import Qualifications
from tests.support.market import FORM_PAGE


def test_groups_are_idempotent_and_shut_their_members_out(local_mturk):
    m, workers, _ = local_mturk
    assert isinstance(m, WorkerGroups)
    gid = m.worker_group("campaign x 0123abcd likert-00001 workers")
    assert m.worker_group("campaign x 0123abcd likert-00001 workers") == gid  # found again by name (after a crash)
    other = m.worker_group("campaign x 0123abcd likert-00002 workers")
    assert other != gid
    for w in ("AINSIDE0000001", "AOUTSIDE000001"):
        workers.register(w)
    m.add_to_group(gid, "AINSIDE0000001")
    m.add_to_group(gid, "AINSIDE0000001")  # granting twice is harmless
    base = dict(title="T", description="D", reward=Decimal("0.10"), duration=600, auto_approval_delay=3600, keywords="k",
                qualifications=Qualifications())
    plain = m.create_hit_type(HitType(**base), sandbox=True)
    shut = m.create_hit_type(HitType(**base, excluded_groups=(gid,)), sandbox=True)
    assert shut != plain
    hit = m.create_hit(shut, HitRequest(html=FORM_PAGE, max_assignments=2, lifetime=3600, annotation="a", token="t"))
    with pytest.raises(WorkerAPIError) as err:
        workers.accept("AINSIDE0000001", hit.hit_id)
    assert err.value.code == "DoesNotMeetRequirements"
    assert workers.accept("AOUTSIDE000001", hit.hit_id)["AssignmentId"]
    open_hit = m.create_hit(plain, HitRequest(html=FORM_PAGE, max_assignments=2, lifetime=3600, annotation="b", token="u"))
    assert workers.accept("AINSIDE0000001", open_hit.hit_id)["AssignmentId"]  # only the twin's type shuts them out
