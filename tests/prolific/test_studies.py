"""Crash between each remote call and its record: a restart on the same journal (the store's) reconciles
and never creates a second study, sends a decision twice or pays a bonus twice (against the emulator)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from campaign.clock import ManualClock
from campaign.prolific.client import ProlificClient, ProlificError
from campaign.prolific.emulator.participant import add_participant
from campaign.prolific.emulator.server import RunningEmulator, start_emulator
from campaign.prolific.studies import BonusPending, BonusUncertain, ProlificStudies
from campaign.prolific.study import ProlificConfig, study_body
from campaign.prolific.verdict import Verdict, rejection_message
from campaign.store import Store

pytestmark = pytest.mark.prolific

CFG = ProlificConfig(public_url="http://127.0.0.1:9", bundle=2, estimated_minutes=10, reward=Decimal("1.50"))
CHANGING = ("create_study", "transition_study", "update_study", "approve", "reject", "create_bonus", "pay_bonus")


class Crash(BaseException):
    """The process dying right after a remote call returned, before the journal recorded it."""


class Dying:
    """The client, except that the `n`-th changing call (counting from 1) succeeds remotely and then 'kills' us."""

    def __init__(self, api: ProlificClient, n: int) -> None:
        self.api, self.n, self.calls = api, n, 0

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.api, name)
        if name not in CHANGING:
            return fn

        def call(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            self.calls += 1
            if self.calls == self.n:
                raise Crash(name)
            return out
        return call


def body(name: str, code: str, places: int) -> dict[str, Any]:
    return study_body(CFG, name="Rate statements", description="Rate how important statements are.", internal_name=name,
                      places=places, completion_code=code, seat="s1", project_id=None, block_group_id=None)


def journal(api: Any, folder: Path, **options: Any) -> ProlificStudies:
    """Campaign "c"'s journal in the store under `folder`, opened as a restarted process opens it."""
    return ProlificStudies(api, Store.open(folder), "c", **options)


def scenario(api: Any, folder: Path, em: RunningEmulator, people: list[Any]) -> str:
    """Everything the campaign does remotely, in order; safe to run again from the top after a crash."""
    st = journal(api, folder)
    try:
        sid = st.ensure_study("stage-1", 2, body)
        st.raise_places("stage-1", 3)
        subs = sorted(s["id"] for s in api.submissions(sid))
        if not subs:  # the participants' side (not the campaign's) runs once
            for p in people:
                sub, _ = p.start(sid)
                p.complete(sub, st.study("stage-1").completion_code)  # type: ignore[union-attr]
            subs = sorted(s["id"] for s in api.submissions(sid))
        good, bad = subs
        st.decide(good, Verdict("approve"))
        st.decide(bad, Verdict("reject", "LOW_EFFORT", rejection_message(["every check statement was rated wrongly"])))
        st.bonus("bonus-1", sid, good, Decimal("0.40"))
        st.bonus("bonus-2", sid, good, Decimal("0.25"))
        st.stop("stage-1")
        return sid
    finally:
        st.store.close()


def _emulator(tmp: Path) -> tuple[RunningEmulator, ProlificClient]:
    em = start_emulator(tmp / "em", ManualClock(), fee_rate=Decimal("0.3"), vat_rate=Decimal("0.2"))
    return em, ProlificClient(em.base_url, em.token, max_retries=0)


@pytest.mark.parametrize("n", range(1, 12))
def test_a_crash_after_any_remote_call_changes_nothing_twice(tmp_path: Path, n: int) -> None:
    em, api = _emulator(tmp_path)
    try:
        people = [add_participant(em.root_url, em.token) for _ in range(2)]
        dying = Dying(api, n)
        try:
            scenario(dying, tmp_path / "journal", em, people)
            crashed = False
        except Crash:
            crashed = True
        assert crashed == (n <= 10)  # ten changing calls: create, publish, places, 2 decisions, 2x(create+pay) bonus, stop
        sid = scenario(api, tmp_path / "journal", em, people)  # the restart
        assert [s["id"] for s in api.studies()] == [sid]  # one study, never two
        st = api.study(sid)
        assert st["total_available_places"] == 3 and st["status"] != "ACTIVE"
        subs = {s["id"]: api.submission(s["id"]) for s in api.submissions(sid)}
        statuses = sorted(s["status"] for s in subs.values())
        assert statuses == ["APPROVED", "REJECTED"]
        good = next(s for s in subs.values() if s["status"] == "APPROVED")
        assert sorted(good["bonus_payments"]) == [25, 40]  # each bonus paid exactly once
    finally:
        em.stop()


def test_a_bonus_interrupted_during_pay_is_not_paid_again(tmp_path: Path) -> None:
    em, api = _emulator(tmp_path)
    try:
        p = add_participant(em.root_url, em.token)
        st = journal(api, tmp_path / "j")
        sid = st.ensure_study("s", 1, body)
        sub, _ = p.start(sid)
        p.complete(sub, st.study("s").completion_code)  # type: ignore[union-attr]
        st.decide(sub, Verdict("approve"))
        pays: list[str] = []

        class LostAnswer:
            """The pay call reaches Prolific, but its answer is lost (a dropped connection)."""

            def __getattr__(self, name: str) -> Any:
                fn = getattr(api, name)
                if name != "pay_bonus":
                    return fn

                def pay(batch: str) -> None:
                    fn(batch)
                    pays.append(batch)
                    raise ConnectionError("connection reset")
                return pay

        flaky = journal(LostAnswer(), tmp_path / "j")
        with pytest.raises(ConnectionError):
            flaky.bonus("b", sid, sub, Decimal("1.00"))
        assert st.bonus("b", sid, sub, Decimal("1.00")) == "paid"  # the retry looks before paying
        assert api.submission(sub)["bonus_payments"] == [100] and len(pays) == 1
        st.bonus("b", sid, sub, Decimal("1.00"))
        assert api.submission(sub)["bonus_payments"] == [100]
        st.store.close()
        flaky.store.close()
    finally:
        em.stop()


class Gone(BaseException):
    """The process dying just before the pay call left it (the journal says "paying")."""


def _paid_submission(em: RunningEmulator, api: ProlificClient, st: ProlificStudies) -> tuple[str, str]:
    p = add_participant(em.root_url, em.token)
    sid = st.ensure_study("s", 1, body)
    sub, _ = p.start(sid)
    p.complete(sub, st.study("s").completion_code)  # type: ignore[union-attr]
    st.decide(sub, Verdict("approve"))
    return sid, sub


def _times_paid(em: RunningEmulator) -> int:
    return sum(int(b["times_paid"]) for b in em.store.all("bonus"))


def test_a_crash_after_the_pay_call_never_pays_again_while_prolific_is_still_paying(tmp_path: Path) -> None:
    """Prolific pays a batch asynchronously: right after the crash the submission shows no bonus yet, and
    a second pay call would pay it twice. The restart waits for the payment to show instead."""
    clock = ManualClock()
    em = start_emulator(tmp_path / "em", clock, fee_rate=Decimal("0.3"), bonus_delay=300)
    api = ProlificClient(em.base_url, em.token, max_retries=0)
    try:
        st = journal(api, tmp_path / "j", now=clock.now)
        sid, sub = _paid_submission(em, api, st)
        with pytest.raises(Crash):
            journal(Dying(api, 2), tmp_path / "j", now=clock.now).bonus("b", sid, sub, Decimal("1.00"))  # create, pay
        assert api.submission(sub)["bonus_payments"] == []  # paid, not visible yet
        with pytest.raises(BonusPending):
            st.bonus("b", sid, sub, Decimal("1.00"))
        clock.advance(301)
        assert st.bonus("b", sid, sub, Decimal("1.00")) == "paid"
        assert api.submission(sub)["bonus_payments"] == [100] and _times_paid(em) == 1
        assert st.uncertain_bonuses() == []
    finally:
        em.stop()


def test_a_pay_call_that_may_not_have_left_is_reconciled_for_a_bounded_time_then_uncertain(tmp_path: Path) -> None:
    clock = ManualClock()
    em = start_emulator(tmp_path / "em", clock, fee_rate=Decimal("0.3"), bonus_delay=300)
    api = ProlificClient(em.base_url, em.token, max_retries=0)
    try:
        st = journal(api, tmp_path / "j", now=clock.now, reconcile_seconds=900)
        sid, sub = _paid_submission(em, api, st)

        class DiesBeforePaying:
            def __getattr__(self, name: str) -> Any:
                if name == "pay_bonus":
                    def die(batch: str) -> None:
                        raise Gone(batch)
                    return die
                return getattr(api, name)

        with pytest.raises(Gone):
            journal(DiesBeforePaying(), tmp_path / "j", now=clock.now).bonus("b", sid, sub, Decimal("1.00"))
        with pytest.raises(BonusPending):
            st.bonus("b", sid, sub, Decimal("1.00"))
        clock.advance(600)
        with pytest.raises(BonusPending):
            st.bonus("b", sid, sub, Decimal("1.00"))
        clock.advance(301)
        with pytest.raises(BonusUncertain, match="not paid again automatically"):
            st.bonus("b", sid, sub, Decimal("1.00"))
        with pytest.raises(BonusUncertain):
            st.bonus("b", sid, sub, Decimal("1.00"))  # and stays so: the researcher decides, not the program
        assert _times_paid(em) == 0 and api.submission(sub)["bonus_payments"] == []
        assert [k for k, _s, _c in st.uncertain_bonuses()] == ["b"]
    finally:
        em.stop()


def test_a_refused_pay_call_paid_nothing_and_is_tried_again(tmp_path: Path) -> None:
    em, api = _emulator(tmp_path)
    try:
        st = journal(api, tmp_path / "j")
        sid, sub = _paid_submission(em, api, st)

        class Refusing:
            def __getattr__(self, name: str) -> Any:
                if name == "pay_bonus":
                    def refuse(batch: str) -> None:
                        raise ProlificError(400, "Bad request", "Insufficient funds for these bonuses.")
                    return refuse
                return getattr(api, name)

        with pytest.raises(ProlificError):
            journal(Refusing(), tmp_path / "j").bonus("b", sid, sub, Decimal("1.00"))
        assert st.bonus("b", sid, sub, Decimal("1.00")) == "paid"  # a 4xx paid nothing: paying now is safe
        assert api.submission(sub)["bonus_payments"] == [100] and _times_paid(em) == 1
    finally:
        em.stop()


def test_a_study_awaiting_review_is_stopped_once_a_freed_place_makes_it_active_again(tmp_path: Path) -> None:
    """Prolific stops only an ACTIVE or PAUSED study. One whose places are all finished (AWAITING
    REVIEW) turns ACTIVE by itself when a place frees; it must then be stopped, not left recruiting."""
    em, api = _emulator(tmp_path)
    st = journal(api, tmp_path / "journal")
    try:
        sid = st.ensure_study("stage-1", 1, body)
        p = add_participant(em.root_url, em.token)
        sub, _ = p.start(sid)
        p.complete(sub, st.study("stage-1").completion_code)  # type: ignore[union-attr]
        assert api.study(sid)["status"] == "AWAITING REVIEW"
        st.stop("stage-1")
        assert st.stopping("stage-1") and st.study("stage-1").state == "stopping"  # type: ignore[union-attr]
        st.decide(sub, Verdict("reject", "LOW_EFFORT", rejection_message(["every check statement was rated wrongly"])))
        assert api.study(sid)["status"] == "ACTIVE"  # the rejected place recruits a replacement
        st.stop("stage-1")
        assert api.study(sid)["status"] == "COMPLETED" and st.study("stage-1").state == "stopped"  # type: ignore[union-attr]
    finally:
        st.store.close()
        em.stop()


def _uncertain_after(em: RunningEmulator, api: ProlificClient, st: ProlificStudies, tmp: Path, clock: ManualClock,
                     pay_leaves: bool) -> tuple[str, str]:
    """A bonus "b" made uncertain: its pay call went through (`pay_leaves`) or died before it left; either
    way the journal says "paying" and no payment shows within the reconciliation time."""
    sid, sub = _paid_submission(em, api, st)

    class Cut:
        def __getattr__(self, name: str) -> Any:
            if name == "pay_bonus":
                def pay(batch: str) -> None:
                    if pay_leaves:
                        api.pay_bonus(batch)
                    raise Gone(batch)
                return pay
            return getattr(api, name)

    with pytest.raises(Gone):
        journal(Cut(), tmp / "j", now=clock.now).bonus("b", sid, sub, Decimal("1.00"))
    with pytest.raises(BonusPending):
        st.bonus("b", sid, sub, Decimal("1.00"))
    clock.advance(200)
    with pytest.raises(BonusUncertain):
        st.bonus("b", sid, sub, Decimal("1.00"))
    return sid, sub


def test_an_uncertain_bonus_the_researcher_saw_paid_is_recorded_paid_and_never_sent_again(tmp_path: Path) -> None:
    clock = ManualClock()
    em = start_emulator(tmp_path / "em", clock, fee_rate=Decimal("0.3"), bonus_delay=3600)  # shows only after an hour
    api = ProlificClient(em.base_url, em.token, max_retries=0)
    try:
        st = journal(api, tmp_path / "j", now=clock.now, reconcile_seconds=150)
        sid, sub = _uncertain_after(em, api, st, tmp_path, clock, pay_leaves=True)
        assert _times_paid(em) == 1
        with pytest.raises(LookupError):
            st.resolve_uncertain("nope", True)
        assert st.resolve_uncertain("b", True) == "paid"
        assert st.bonus("b", sid, sub, Decimal("1.00")) == "paid" and st.bonus_paid("b")
        assert _times_paid(em) == 1 and st.uncertain_bonuses() == []
        with pytest.raises(LookupError, match="it is paid"):  # the program's record stands once it has one
            st.resolve_uncertain("b", False)
    finally:
        em.stop()


def test_an_uncertain_bonus_the_researcher_saw_unpaid_is_paid_once(tmp_path: Path) -> None:
    clock = ManualClock()
    em = start_emulator(tmp_path / "em", clock, fee_rate=Decimal("0.3"), bonus_delay=0)
    api = ProlificClient(em.base_url, em.token, max_retries=0)
    try:
        st = journal(api, tmp_path / "j", now=clock.now, reconcile_seconds=150)
        sid, sub = _uncertain_after(em, api, st, tmp_path, clock, pay_leaves=False)
        assert _times_paid(em) == 0
        assert st.resolve_uncertain("b", False) == "created"
        assert st.bonus("b", sid, sub, Decimal("1.00")) == "paid"
        assert st.bonus("b", sid, sub, Decimal("1.00")) == "paid"
        assert _times_paid(em) == 1 and api.submission(sub)["bonus_payments"] == [100]
    finally:
        em.stop()
