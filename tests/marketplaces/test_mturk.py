"""The MTurk implementation of the marketplace interface, against the built-in marketplace in-process:
idempotent HIT creation and bonuses, errors as the interface's exception types, normalised values."""

from __future__ import annotations

from decimal import Decimal

import pytest

from campaign.market.worker_client import WorkerClient
from campaign.marketplaces.base import AlreadyDone, HitRequest, HitType, InvalidState, MarketError, Marketplace
from campaign.spec import Qualifications
from tests.support.market import FORM_PAGE


def _type(m: Marketplace) -> str:
    return m.create_hit_type(HitType(title="T", description="D", reward=Decimal("0.10"), duration=600,
                                     auto_approval_delay=3600, keywords="k", qualifications=Qualifications()),
                             sandbox=True)


def _submitted(m: Marketplace, workers: WorkerClient, worker: str = "AWORKER0000001") -> tuple[str, str]:
    hit = m.create_hit(_type(m), HitRequest(html=FORM_PAGE, max_assignments=2, lifetime=3600, annotation=f"a-{worker}",
                                            token=f"t-{worker}"))
    workers.register(worker)
    aid = workers.accept(worker, hit.hit_id)["AssignmentId"]
    workers.submit(aid, [("assignmentId", aid), ("answer", "yes & <no>")])
    return hit.hit_id, aid


def test_it_implements_the_protocol_and_posts_idempotently(local_mturk):
    m, _, clock = local_mturk
    assert isinstance(m, Marketplace) and m.capabilities.token_lifetime == 24 * 3600
    type_id = _type(m)
    assert _type(m) == type_id  # same settings, same type
    req = HitRequest(html=FORM_PAGE, max_assignments=3, lifetime=3600, annotation="campaign=x;hit=1", token="tok-1")
    first = m.create_hit(type_id, req)
    assert not first.reconciled and first.annotation == req.annotation and first.expires_at == pytest.approx(clock.now() + 3600)
    again = m.create_hit(type_id, req)  # same token: the same HIT, found, not a second one
    assert again.hit_id == first.hit_id and again.reconciled
    assert m.find_by_annotation(req.annotation).hit_id == first.hit_id
    assert m.find_by_annotation("nothing") is None
    assert m.get_hit(first.hit_id).closed is False


def test_work_is_listed_parsed_and_decided_once(local_mturk):
    m, workers, _ = local_mturk
    hit_id, aid = _submitted(m, workers)
    [a] = m.submissions(hit_id)
    assert (a.assignment_id, a.worker_id, a.status) == (aid, "AWORKER0000001", "submitted") and a.submit_time
    assert ("answer", "yes & <no>") in m.answer_fields(a.answer)
    m.approve(aid)
    with pytest.raises(InvalidState):
        m.approve(aid)  # a repeated approval: the caller reads the assignment back
    assert m.get_assignment(aid).status == "approved"
    m.bonus("AWORKER0000001", aid, Decimal("0.25"), "careful work", token="bonus-1")
    with pytest.raises(AlreadyDone):
        m.bonus("AWORKER0000001", aid, Decimal("0.25"), "careful work", token="bonus-1")
    assert m.balance() < Decimal("100.00")


def test_expiry_extension_block_and_errors(local_mturk):
    m, workers, clock = local_mturk
    hit_id, aid = _submitted(m, workers)
    m.extend_hit(hit_id, clock.now() + 7200)
    assert m.get_hit(hit_id).expires_at == pytest.approx(clock.now() + 7200, abs=1)
    m.expire_hit(hit_id, clock.now() - 60)
    assert m.get_hit(hit_id).expires_at <= clock.now()
    m.block("AWORKER0000002", "spam")
    with pytest.raises(MarketError) as err:
        m.reject("ANOSUCHASSIGNMENT000000000000", "no")
    assert not isinstance(err.value, (AlreadyDone, InvalidState)) and str(err.value)


@pytest.mark.parametrize(("name", "sandbox_ids"), [("local", True), ("mturk-sandbox", True), ("mturk", False)])
def test_which_qualification_ids_it_uses_is_its_own_capability(monkeypatch, name: str, sandbox_ids: bool) -> None:
    """The post step asks the marketplace, not the campaign's `marketplace:`, whether MTurk's system
    qualifications go by their sandbox ids (no request is made: the client is only built)."""
    from campaign.marketplaces.mturk import open_mturk

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATESTTESTTESTTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-secret")
    m = open_mturk(name, "http://127.0.0.1:9" if name == "local" else None, production_ok=True)
    assert m.capabilities.sandbox_qualifications is sandbox_ids


def test_reviewable_hits_of_some_hit_types_only(local_mturk):
    """ListReviewableHITs with HITTypeId: a campaign lists its own finished HITs, not the account's."""
    m, local_workers, _ = local_mturk
    types = [m.create_hit_type(HitType(title="T", description="D", reward=Decimal("0.10"), duration=600,
                                       auto_approval_delay=3600, keywords=f"k, campaign-{n}", qualifications=Qualifications()),
                               sandbox=True) for n in range(3)]
    assert len(set(types)) == 3  # one more keyword, another type
    done = {}
    for n, type_id in enumerate(types):
        hit = m.create_hit(type_id, HitRequest(html=FORM_PAGE, max_assignments=1, lifetime=3600, annotation=f"r-{n}",
                                               token=f"r-{n}"))
        local_workers.register(f"AREVIEW{n:07d}")
        aid = local_workers.accept(f"AREVIEW{n:07d}", hit.hit_id)["AssignmentId"]
        local_workers.submit(aid, [("assignmentId", aid), ("answer", "x")])
        done[type_id] = hit.hit_id
    everything = m.reviewable_hits()
    assert set(done.values()) <= set(everything)
    assert m.reviewable_hits([types[1]]) == [done[types[1]]]
    assert m.reviewable_hits([types[2], types[0]]) == [done[types[2]], done[types[0]]]
