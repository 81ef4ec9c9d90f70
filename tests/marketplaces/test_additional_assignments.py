"""More slots on a posted HIT (`AdditionalAssignments`): on the MTurk implementation against the built-in
marketplace, once per token. Prolific declares it too (the task site's HIT gets the slots, the study the
places: tests/marketplaces/test_prolific_add_assignments.py), and the replace step uses it there only when
the spec asks (`quality.replace_excluded`: tests/steps/test_replace_excluded_switch.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from campaign.market.worker_client import WorkerAPIError
from campaign.marketplaces.base import AdditionalAssignments, AlreadyDone, HitRequest, HitType
from campaign.marketplaces.prolific import ProlificMarketplace
from campaign.spec import Qualifications
from tests.support.market import FORM_PAGE


def test_added_slot_takes_another_worker_once_per_token(local_mturk):
    m, workers, _ = local_mturk
    assert isinstance(m, AdditionalAssignments)
    t = m.create_hit_type(HitType(title="T", description="D", reward=Decimal("0.10"), duration=600, auto_approval_delay=3600,
                                  keywords="k", qualifications=Qualifications()), sandbox=True)
    hit = m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=1, lifetime=3600, annotation="a", token="t"))
    for w in ("AFIRST00000001", "ASECOND0000001", "ATHIRD00000001"):
        workers.register(w)
    assert workers.accept("AFIRST00000001", hit.hit_id)["AssignmentId"]
    with pytest.raises(WorkerAPIError):
        workers.accept("ASECOND0000001", hit.hit_id)  # the one slot is taken
    m.add_assignments(hit.hit_id, 1, "campaign-x-h1-extra-1")
    with pytest.raises(AlreadyDone):
        m.add_assignments(hit.hit_id, 1, "campaign-x-h1-extra-1")  # a retry after a crash adds nothing
    assert workers.accept("ASECOND0000001", hit.hit_id)["AssignmentId"]
    with pytest.raises(WorkerAPIError):
        workers.accept("ATHIRD00000001", hit.hit_id)  # exactly one slot was added


def test_prolific_studies_declare_it():
    assert issubclass(ProlificMarketplace, AdditionalAssignments)
