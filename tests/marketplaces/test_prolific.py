"""Prolific through the marketplace interface: HITs on the task site, a study whose places cover them,
participants doing bundles through the door, per-HIT decisions turned into one decision per submission."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from campaign.marketplaces.base import HitRequest, HitType, Marketplace, Studies
from campaign.prolific.checks import CheckCount
from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.participant import Participant, add_participant
from campaign.prolific.study import ProlificConfig
from campaign.spec import Qualifications
from campaign.store import EventRow, Store
from tests.prolific.support import adapter_stack
from tests.support.http import call_json
from tests.support.market import FORM_PAGE

pytestmark = pytest.mark.prolific


def _config(bundle: int, **more: Any) -> Callable[[str, ProlificClient], ProlificConfig]:
    """A study paying 1.50 per submission of `bundle` HITs, at a 30% fee."""
    return lambda url, _api: ProlificConfig(public_url=url, bundle=bundle, estimated_minutes=10, reward=Decimal("1.50"),
                                            fee_rate=Decimal("0.3"), **more)


def _do_bundle(site: str, p: Participant, study_id: str, answer: str) -> tuple[str, list[str]]:
    sub, _ = p.start(study_id)
    session = {"PROLIFIC_PID": p.id, "STUDY_ID": study_id, "SESSION_ID": sub}
    step = call_json(f"{site}/prolific/api/next?" + urllib.parse.urlencode(session))
    aids = []
    while step["status"] == "task":
        aids.append(step["AssignmentId"])
        step = call_json(f"{site}/prolific/api/submit", {**session, "assignmentId": step["AssignmentId"], "fields": [["answer", answer]]})
    assert step["status"] == "done"
    assert p.complete_from_redirect(sub, step["redirect"]) == "AWAITING REVIEW"
    return sub, aids


@pytest.mark.slow
def test_studies_places_and_bundle_verdicts(tmp_path: Path) -> None:
    with adapter_stack(tmp_path, _config(bundle=2)) as st:
        em, server, api, studies, m = st.em, st.server, st.api, st.studies, st.market
        assert isinstance(m, Marketplace) and isinstance(m, Studies)
        t = m.create_hit_type(HitType(title="Rate", description="Rate statements", reward=Decimal("0.10"), duration=600,
                                      auto_approval_delay=86400, keywords="k", qualifications=Qualifications()), sandbox=True)
        hits = [m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=2, lifetime=86400, annotation=f"a{i}", token=f"t{i}"))
                for i in range(2)]
        assert studies.study(t) is None  # posting HITs opens nothing on Prolific: places come after the ledger's reservation
        assert m.places_wanted() == {t: 2}  # 4 assignments / bundle of 2
        assert m.refill(t, 2) == 2
        sid = studies.study(t).study_id  # type: ignore[union-attr]
        study = api.study(sid)
        assert study["status"] == "ACTIVE" and study["total_available_places"] == 2  # 4 assignments / bundle of 2
        assert study["reward"] == 150 and "/prolific/start?" in study["external_study_url"]
        m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=2, lifetime=86400, annotation="a0", token="t0"))
        assert m.places_wanted() == {t: 2}  # the same HIT found again counts once

        alice, bob = add_participant(em.root_url, em.token), add_participant(em.root_url, em.token)
        a_sub, a_aids = _do_bundle(server.endpoint_url, alice, sid, "careful")
        b_sub, b_aids = _do_bundle(server.endpoint_url, bob, sid, "spam")
        assert len(a_aids) == len(b_aids) == 2
        assert {m.get_assignment(a).hit_id for a in a_aids} == {h.hit_id for h in hits}

        m.approve(a_aids[0])
        assert api.submission(a_sub)["status"] == "AWAITING REVIEW"  # one HIT of two decided: wait
        m.reject(a_aids[1], "failed the check statements")
        assert api.submission(a_sub)["status"] == "APPROVED"  # mixed bundle: approved
        for a in b_aids:
            m.reject(a, "constant answers on every statement")
        # every HIT rejected by quality control, no attention check failed: Prolific's rules allow no
        # rejection for that, so the submission is paid and its judgments stay out of the scores
        assert api.submission(b_sub)["status"] == "APPROVED"
        # both places taken for good; a new HIT of 2 assignments needs a new place ...
        m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=2, lifetime=86400, annotation="a2", token="t2"))
        assert m.places_wanted() == {t: 3}
        # ... and one more another (2 approved + 4 open assignments / 2)
        m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=2, lifetime=86400, annotation="a3", token="t3"))
        assert m.places_wanted() == {t: 4}
        assert m.refill(t, 4) == 4 and api.study(sid)["total_available_places"] == 4
        settled = {s.submission_id: s.status for s in m.settle()}  # settling again sends nothing new
        assert settled == {a_sub: "approved", b_sub: "approved"}
        cost = m.place_cost()  # 1.50 + 0.45 fee (30%), no VAT
        assert (cost.total, cost.fee) == (Decimal("1.95"), Decimal("0.45"))

        m.bonus("AP" + alice.id.upper(), a_aids[0], Decimal("0.50"), "agreement", "bonus-a")
        m.bonus("AP" + alice.id.upper(), a_aids[0], Decimal("0.50"), "agreement", "bonus-a")
        assert api.submission(a_sub)["bonus_payments"] == [50]
        assert m.stop(t) is True  # nobody is still working on it: nothing more can be paid
        assert api.study(sid)["status"] != "ACTIVE"


def _rating_hits(m: Any, n: int, bundle_tag: str) -> str:
    t = m.create_hit_type(HitType(title="Rate", description="Rate statements", reward=Decimal("0.10"), duration=600,
                                  auto_approval_delay=86400, keywords="k", qualifications=Qualifications()), sandbox=True)
    for i in range(n):
        m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=1, lifetime=86400, annotation=f"{bundle_tag}{i}",
                                   token=f"{bundle_tag}{i}"))
    return str(t)


@pytest.mark.slow
def test_submissions_are_rejected_only_for_failed_attention_checks_each_with_one_message(tmp_path: Path) -> None:
    """Prolific's rule for a study of 5 minutes or more: two failed fair attention checks allow a
    rejection (FAILED_CHECK), one does not; the rejection carries one message of its own. The old code
    rejected as LOW_EFFORT whatever quality control rejected, with the HITs' feedback nested inside."""
    failed: set[str] = set()  # assignments whose attention check was answered against its instruction

    def checks(aids: Sequence[str]) -> CheckCount:
        return CheckCount(len(aids), sum(1 for a in aids if a in failed))

    with adapter_stack(tmp_path, _config(bundle=2), checks=checks) as st:
        em, server, api, studies, m = st.em, st.server, st.api, st.studies, st.market
        t = _rating_hits(m, 4, "f")
        m.refill(t, 2)
        sid = studies.study(t).study_id  # type: ignore[union-attr]
        alice, bob = add_participant(em.root_url, em.token), add_participant(em.root_url, em.token)
        a_sub, a_aids = _do_bundle(server.endpoint_url, alice, sid, "careful")
        b_sub, b_aids = _do_bundle(server.endpoint_url, bob, sid, "careless")
        failed.update([a_aids[0], *b_aids])  # alice failed one of her two checks, bob both
        for a in a_aids:
            m.approve(a)
        m.approve(b_aids[0])  # quality control kept his work: the checks alone decide
        m.approve(b_aids[1])
        assert api.submission(a_sub)["status"] == "APPROVED"  # one failed check: paid
        assert api.submission(b_sub)["status"] == "REJECTED"
        rejected = em.store.get("submission", b_sub)
        assert rejected["rejection_category"] == "FAILED_CHECK"
        message = rejected["rejection_message"]
        assert len(message) >= 100 and "2 of its 2 attention checks" in message
        assert message.count("Thank you") == 1 and "because Thank" not in message  # one message, none nested
        with st.store.session() as s:
            events = s.exec(select(EventRow).where(EventRow.kind == "submission_rejected")).all()
        assert [(e.subject, json.loads(e.data or "{}")["category"]) for e in events] == [(b_sub, "FAILED_CHECK")]


@pytest.mark.slow
def test_an_exceptionally_fast_submission_is_rejected_as_too_quickly(tmp_path: Path) -> None:
    """Exceptionally fast: under `too_quick` (0.2) of the lesser of the estimate (10 min) and the median
    time the study's completed submissions took. Two participants take 6 minutes, one 30 seconds."""
    with adapter_stack(tmp_path, _config(bundle=1)) as st:
        em, server, api, studies, m = st.em, st.server, st.api, st.studies, st.market
        t = _rating_hits(m, 3, "q")
        m.refill(t, 3)
        sid = studies.study(t).study_id  # type: ignore[union-attr]
        done = []
        for took in (360.0, 360.0, 30.0):
            p = add_participant(em.root_url, em.token)
            sub, _ = p.start(sid)
            session = {"PROLIFIC_PID": p.id, "STUDY_ID": sid, "SESSION_ID": sub}
            step = call_json(f"{server.endpoint_url}/prolific/api/next?" + urllib.parse.urlencode(session))
            st.clock.advance(took)
            aid = step["AssignmentId"]
            step = call_json(f"{server.endpoint_url}/prolific/api/submit", {**session, "assignmentId": aid,
                                                                            "fields": [["answer", "x"]]})
            assert p.complete_from_redirect(sub, step["redirect"]) == "AWAITING REVIEW"
            done.append((sub, aid))
        m.settle()  # the sweep lists the study: its submissions' times
        for _sub, aid in done:
            m.approve(aid)
        assert [api.submission(s)["status"] for s, _ in done] == ["APPROVED", "APPROVED", "REJECTED"]
        quick = em.store.get("submission", done[2][0])
        assert quick["rejection_category"] == "TOO_QUICKLY" and len(quick["rejection_message"]) >= 100
        assert "30 s" in quick["rejection_message"]


def test_a_blocked_participant_joins_the_block_list_group_and_no_longer_sees_the_study(tmp_path: Path) -> None:
    def configure(url: str, api: ProlificClient) -> ProlificConfig:
        group = api.create_group("blocked", api.workspaces()[0]["id"])["id"]
        return _config(bundle=1, block_list=group)(url, api)

    with adapter_stack(tmp_path, configure) as st:
        em, server, api, studies, m = st.em, st.server, st.api, st.studies, st.market
        group = st.cfg.block_list
        t = m.create_hit_type(HitType(title="Rate", description="Rate statements", reward=Decimal("0.10"), duration=600,
                                      auto_approval_delay=86400, keywords="k", qualifications=Qualifications()), sandbox=True)
        for i in range(3):
            m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=1, lifetime=86400, annotation=f"b{i}", token=f"u{i}"))
        m.refill(t, 3)
        sid = studies.study(t).study_id  # type: ignore[union-attr]
        mallory, bob = add_participant(em.root_url, em.token), add_participant(em.root_url, em.token)
        assert sid in {s["id"] for s in mallory.studies()}
        _do_bundle(server.endpoint_url, mallory, sid, "spam")
        m.block("AP" + mallory.id.upper(), "constant answers")
        m.block("AP" + mallory.id.upper(), "constant answers")  # again (a retry): still one member
        assert api.group_members(group) == [mallory.id]
        assert sid not in {s["id"] for s in mallory.studies()}  # Prolific no longer offers it to them
        assert sid in {s["id"] for s in bob.studies()}


@pytest.mark.slow
def test_a_decision_cut_off_between_the_task_site_and_prolific_is_sent_by_the_next_sweep(tmp_path: Path,
                                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from campaign.prolific.client import ProlificError

    with adapter_stack(tmp_path, _config(bundle=1)) as st:
        em, server, api, studies, m = st.em, st.server, st.api, st.studies, st.market
        t = m.create_hit_type(HitType(title="Rate", description="Rate statements", reward=Decimal("0.10"), duration=600,
                                      auto_approval_delay=86400, keywords="k", qualifications=Qualifications()), sandbox=True)
        m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=1, lifetime=86400, annotation="c0", token="v0"))
        m.refill(t, 1)
        sid = studies.study(t).study_id  # type: ignore[union-attr]
        alice = add_participant(em.root_url, em.token)
        sub, aids = _do_bundle(server.endpoint_url, alice, sid, "careful")
        real = studies.api.approve

        def cut_off(submission_id: str) -> dict[str, Any]:
            raise ProlificError(0, "Unreachable", "connection reset")
        monkeypatch.setattr(studies.api, "approve", cut_off)
        m.approve(aids[0])  # decided on the task site; the call to Prolific fails
        assert m.get_assignment(aids[0]).status == "approved"
        assert api.submission(sub)["status"] == "AWAITING REVIEW"
        monkeypatch.setattr(studies.api, "approve", real)
        assert {s.submission_id: s.status for s in m.settle()} == {sub: "approved"}  # the sweep sends it
        assert api.submission(sub)["status"] == "APPROVED"


def test_a_decision_killed_before_the_adapter_noted_it_is_read_back_from_the_task_site(tmp_path: Path) -> None:
    """SIGKILL between the task site's approval and the adapter's note of it: the restarted review sees the
    assignment approved and never asks again, so the sweep reads the verdict from the task site itself
    (found by tests/prolific/test_kill.py's random instants: the campaign waited for that submission forever)."""
    with adapter_stack(tmp_path, _config(bundle=2)) as st:
        em, server, api, studies, m = st.em, st.server, st.api, st.studies, st.market
        t = m.create_hit_type(HitType(title="Rate", description="Rate statements", reward=Decimal("0.10"), duration=600,
                                      auto_approval_delay=86400, keywords="k", qualifications=Qualifications()), sandbox=True)
        for i in range(2):
            m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=1, lifetime=86400, annotation=f"k{i}", token=f"k{i}"))
        m.refill(t, 1)
        sid = studies.study(t).study_id  # type: ignore[union-attr]
        alice = add_participant(em.root_url, em.token)
        sub, aids = _do_bundle(server.endpoint_url, alice, sid, "careful")
        m.inner.approve(aids[0])  # the task site's approval, then the process died: the adapter never heard of it
        m.approve(aids[1])
        assert api.submission(sub)["status"] == "APPROVED"
        assert {s.submission_id: s.status for s in m.settle()} == {sub: "approved"}


class _Door:
    def submission_of(self, assignment_id: str) -> tuple[str, str]:
        return "sub-1", "study-1"


class _Studies:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def bonus(self, key: str, study_id: str, submission_id: str, amount: Decimal) -> str:
        raise self.error


class _Inner:
    capabilities = None


def test_a_bonus_maybe_paid_is_asked_again_later_and_an_uncertain_one_is_no_marketplace_answer(tmp_path: Path) -> None:
    """A pending reconciliation is a `TransientError` (the quality step keeps it "sending" and asks again
    with the same token); an uncertain one is not a marketplace answer, so the step holds it as "may have
    been sent" for the researcher, instead of releasing it as refused."""
    from campaign.marketplaces.base import MarketError, TransientError
    from campaign.marketplaces.prolific import ProlificMarketplace
    from campaign.prolific.studies import BonusPending, BonusUncertain

    cfg = ProlificConfig(public_url="https://t.example.org", reward=Decimal("1.50"))
    store = Store.open(tmp_path)
    pending = ProlificMarketplace(_Inner(), _Studies(BonusPending("not visible yet")), _Door(), cfg, store, "a")  # type: ignore[arg-type]
    with pytest.raises(TransientError, match="not visible yet"):
        pending.bonus("APX", "A1", Decimal("0.20"), "thanks", "tok")
    unsure = ProlificMarketplace(_Inner(), _Studies(BonusUncertain("check on Prolific")), _Door(), cfg, store, "b")  # type: ignore[arg-type]
    with pytest.raises(BonusUncertain) as err:
        unsure.bonus("APX", "A1", Decimal("0.20"), "thanks", "tok")
    assert not isinstance(err.value, MarketError)
    pending.close()
    unsure.close()
    store.close()


def test_the_sweep_gives_a_returned_places_open_task_back_to_the_task_site(tmp_path: Path) -> None:
    """A participant who returns the place with a task open: without the sweep's release the task stays
    Accepted on the task site until its own deadline and nobody else can take that slot (hostile seed 2
    waited three simulated days for it)."""
    with adapter_stack(tmp_path, _config(bundle=2)) as st:
        m, api, server = st.market, st.api, st.server
        t = m.create_hit_type(HitType(title="Rate", description="Rate statements", reward=Decimal("0.10"), duration=600,
                                      auto_approval_delay=86400, keywords="k", qualifications=Qualifications()), sandbox=True)
        m.create_hit(t, HitRequest(html=FORM_PAGE, max_assignments=1, lifetime=86400, annotation="a0", token="t0"))
        m.refill(t, 1)
        sid = st.studies.study(t).study_id  # type: ignore[union-attr]
        alice = add_participant(st.em.root_url, st.em.token)
        sub, _ = alice.start(sid)
        session = {"PROLIFIC_PID": alice.id, "STUDY_ID": sid, "SESSION_ID": sub}
        task = call_json(f"{server.endpoint_url}/prolific/api/next?" + urllib.parse.urlencode(session))
        assert task["status"] == "task"
        alice.give_back(sub)

        def status() -> str:
            with server.engine.db.read() as c:
                return str(c.execute("SELECT status FROM assignments WHERE id=?", (task["AssignmentId"],)).fetchone()[0])

        assert status() == "Accepted"
        subs = m.settle()
        assert [s.status for s in subs if s.submission_id == sub] == ["returned"]
        assert status() == "Returned"
        assert api.submission(sub)["status"] == "RETURNED"
