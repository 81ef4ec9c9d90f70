"""The Prolific audit: clean on a correct run, and each finding raised by the one fault it is about."""

from __future__ import annotations

import hashlib
import sqlite3
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from campaign.clock import ManualClock
from campaign.market.prolific_site import ProlificDoor
from campaign.market.server import start_market
from campaign.marketplaces import open_marketplace
from campaign.marketplaces.base import HitRequest, HitType
from campaign.prolific.audit import AuditState, Finding, check, gather
from campaign.prolific.checks import CheckCount
from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.participant import Participant, add_participant
from campaign.prolific.emulator.server import start_emulator
from campaign.prolific.gate import StudySeat
from campaign.prolific.studies import ProlificStudies
from campaign.prolific.verdict import bundle_verdict
from campaign.spec import Qualifications
from campaign.store import HitRow, LedgerRow, Store
from tests.support.http import call_json

pytestmark = pytest.mark.prolific


def clean() -> AuditState:
    """A small campaign in which everything happened once: two submissions decided, one bonus paid,
    four HITs served to two participants, the ledger equal to the charges (2 x 195 + 65 pence)."""
    return AuditState(
        studies={"s1"},
        decisions=[("sub-a", "APPROVE", "researcher"), ("sub-b", "REJECT", "researcher"), ("sub-c", "APPROVE", "prolific")],
        reward_charges=["sub-a", "sub-c"],
        charged_minor=195 + 195 + 65,
        bonus_payments={"sub-a": [50], "sub-b": [], "sub-c": []},
        batches_paid={"batch-1": 1, "batch-2": 0},  # batch-2: created, its pay call never made (costs nothing)
        bonus_intents=[("sub-a", 50), ("sub-c", 50)],
        served=[("pa", "h1"), ("pa", "h2"), ("pb", "h1"), ("pb", "h2")],
        market_assignments=[("APPA", "h1"), ("APPA", "h2"), ("APPB", "h1"), ("APPB", "h2"), ("A1TURK", "h1"), ("A1TURK", "h1")],
        market_hits={"h1", "h2"},
        store_hits={"likert-0000": "h1", "likert-0001": "h2"},
        ledger_spent=Decimal("4.55"),
        charged_by_study={"s1": 455},
        reconciled={"s1": (Decimal("4.55"), Decimal("4.55"))},  # the study's end: ledger and service agreed
    )


FAULTS: dict[str, tuple[str, Callable[[AuditState], AuditState]]] = {
    "a decision sent twice": ("decided_twice", lambda s: replace(s, decisions=[*s.decisions, ("sub-a", "APPROVE", "researcher")])),
    "approved then rejected": ("decided_twice", lambda s: replace(s, decisions=[*s.decisions, ("sub-a", "REJECT", "researcher")])),
    "a reward charged twice": ("decided_twice", lambda s: replace(s, reward_charges=[*s.reward_charges, "sub-a"],
                                                                  charged_minor=s.charged_minor + 195,
                                                                  ledger_spent=Decimal("6.50"))),
    "a bonus paid twice to a submission": ("bonus_paid_twice", lambda s: replace(s, bonus_payments={**s.bonus_payments, "sub-a": [50, 50]},
                                                                                 charged_minor=s.charged_minor + 65,
                                                                                 ledger_spent=Decimal("5.20"))),
    "a bonus paid nobody meant": ("bonus_paid_twice", lambda s: replace(s, bonus_payments={**s.bonus_payments, "sub-b": [50]},
                                                                        charged_minor=s.charged_minor + 65,
                                                                        ledger_spent=Decimal("5.20"))),
    "a bonus of another amount": ("bonus_paid_twice", lambda s: replace(s, bonus_payments={**s.bonus_payments, "sub-c": [40]},
                                                                        charged_minor=s.charged_minor + 52,
                                                                        ledger_spent=Decimal("5.07"))),
    "a batch paid twice": ("bonus_paid_twice", lambda s: replace(s, batches_paid={**s.batches_paid, "batch-1": 2})),
    "the door served a HIT twice": ("served_twice", lambda s: replace(s, served=[*s.served, ("pa", "h1")])),
    "the task site has two assignments": ("served_twice", lambda s: replace(s, market_assignments=[*s.market_assignments, ("APPB", "h2")])),
    "the ledger short of a cent": ("ledger_mismatch", lambda s: replace(s, ledger_spent=Decimal("4.54"))),
    "the ledger over the charges": ("ledger_mismatch", lambda s: replace(s, charged_minor=s.charged_minor - 65)),
    "the ledger in fractions of a cent": ("ledger_mismatch", lambda s: replace(s, ledger_spent=Decimal("4.551"))),
    "a study whose ledger differed from the service": ("cost_mismatch", lambda s: replace(
        s, reconciled={"s1": (Decimal("4.55"), Decimal("4.20"))})),
    "a service figure that is not its own charges": ("cost_mismatch", lambda s: replace(
        s, reconciled={"s1": (Decimal("4.60"), Decimal("4.60"))})),
    "a HIT the task site does not know": ("unknown_hit", lambda s: replace(s, store_hits={**s.store_hits, "likert-0002": "h9"})),
}


def test_a_clean_state_has_no_findings() -> None:
    assert check(clean()) == []
    assert check(replace(clean(), ledger_spent=None, charged_minor=1)) == []  # no store read: the ledger is not compared


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_fault_is_found_and_only_it(fault: str) -> None:
    kind, spoil = FAULTS[fault]
    found = check(spoil(clean()))
    assert found and {f.check for f in found} == {kind}, found
    assert all(isinstance(f, Finding) and f.subject and f.detail for f in found)


# -- gather: the same checks read from a real run's files ---------------------------------------------------------
PAGE = """<!DOCTYPE html><html><body><form method="post" action="https://www.mturk.com/mturk/externalSubmit">
<input type="hidden" name="assignmentId" value=""><input type="text" name="answer"></form></body></html>"""


def _bundle(site: str, p: Participant, study_id: str) -> tuple[str, list[str]]:
    sub, _ = p.start(study_id)
    session = {"PROLIFIC_PID": p.id, "STUDY_ID": study_id, "SESSION_ID": sub}
    step = call_json(f"{site}/prolific/api/next?" + urllib.parse.urlencode(session))
    aids = []
    while step["status"] == "task":
        aids.append(step["AssignmentId"])
        step = call_json(f"{site}/prolific/api/submit", {**session, "assignmentId": step["AssignmentId"], "fields": [["answer", "x"]]})
    p.complete_from_redirect(sub, step["redirect"])
    return sub, aids


def _digest(folder: Path) -> dict[str, str]:
    """Every file's content; SQLite's shared-memory index and an empty write-ahead log (which a
    read-only reader of a WAL database may create) are not content."""
    return {str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(folder.rglob("*"))
            if f.is_file() and not f.name.endswith("-shm") and not (f.name.endswith("-wal") and f.stat().st_size == 0)}


def _body(site: str) -> Callable[[str, str, int], dict[str, Any]]:
    def body(internal_name: str, code: str, places: int) -> dict[str, Any]:
        return {"name": "Rate", "description": "Rate statements", "internal_name": internal_name,
                "external_study_url": f"{site}/prolific/start?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}&STUDY_ID={{{{%STUDY_ID%}}}}"
                                      "&SESSION_ID={{%SESSION_ID%}}",
                "prolific_id_option": "url_parameters", "total_available_places": places, "estimated_completion_time": 5,
                "reward": 150, "completion_codes": [{"code": code, "code_type": "COMPLETED",
                                                     "actions": [{"action": "MANUALLY_REVIEW"}]}]}
    return body


@pytest.mark.slow
def test_gather_reads_a_real_run_and_finds_what_was_done_twice(tmp_path: Path) -> None:
    """The journal's own calls (study, decisions, a bonus asked twice) through the door and the task site,
    then gather + check on the files they leave."""
    clock = ManualClock()
    em = start_emulator(tmp_path / "prolific", clock, fee_rate=Decimal("0.3"))
    server = start_market(tmp_path / "market", clock=clock, mode="prod", balance=Decimal("100.00"))
    api = ProlificClient(em.base_url, em.token, max_retries=0)
    door = ProlificDoor(server.engine, server.core.site.config, tmp_path / "prolific-site", api)
    server.mount("/prolific/", door)
    store = Store.open(tmp_path / "store")
    studies = ProlificStudies(api, store, "c")
    inner = open_marketplace("local", server.endpoint_url, credentials=server.credentials)
    try:
        t = inner.create_hit_type(HitType(title="Rate", description="Rate", reward=Decimal("0.00"), duration=600,
                                          auto_approval_delay=86400, keywords="k", qualifications=Qualifications(locales=())), sandbox=True)
        hits = [inner.create_hit(t, HitRequest(html=PAGE, max_assignments=2, lifetime=86400, annotation=f"a{i}", token=f"t{i}"))
                for i in range(2)]
        sid = studies.ensure_study(t, 2, _body(server.endpoint_url))
        row = studies.study(t)
        assert row is not None
        door.add_seat(StudySeat(sid, t, 2, row.completion_code), stage=t)
        alice, bob = add_participant(em.root_url, em.token), add_participant(em.root_url, em.token)
        a_sub, a_aids = _bundle(server.endpoint_url, alice, sid)
        b_sub, b_aids = _bundle(server.endpoint_url, bob, sid)
        assert len(a_aids) == len(b_aids) == 2
        assert studies.decide(a_sub, bundle_verdict(["approve", "approve"])) == "APPROVED"
        assert studies.decide(b_sub, bundle_verdict(["reject", "reject"], CheckCount(2, 2))) == "REJECTED"
        studies.decide(a_sub, bundle_verdict(["approve", "approve"]))  # asked again: the journal sends nothing
        studies.bonus("bonus-a", sid, a_sub, Decimal("0.50"))
        studies.bonus("bonus-a", sid, a_sub, Decimal("0.50"))  # asked again: paid once
        with store.session() as s:
            for i, h in enumerate(hits):
                s.add(HitRow(campaign="c", stage="likert", hit_key=f"likert-{i:04d}", item_keys="[]", annotation=f"a{i}",
                             token=f"t{i}", status="posted", reward="0.00", assignments=2, hit_id=h.hit_id))
            # 1.50 + 30% fee = 1.95 for Alice's place; 0.50 + 30% = 0.65 for her bonus.
            s.add(LedgerRow(campaign="c", ref=f"charge:{a_sub}", kind="charge", amount="1.95", fee="0.45"))
            s.add(LedgerRow(campaign="c", ref="bonus_charge:bonus-a", kind="bonus_charge", amount="0.65", fee="0.15"))
    finally:
        studies.close()
        server.stop()
        door.close()
        em.stop()
    files: dict[str, Any] = {"emulator_db": tmp_path / "prolific" / "prolific.db",
                             "door_db": tmp_path / "prolific-site" / "prolific-site.sqlite", "market_db": tmp_path / "market" / "market.db"}
    before = _digest(tmp_path / "prolific"), _digest(tmp_path / "prolific-site"), _digest(tmp_path / "market")
    state = gather(**files, store=store, campaign="c")
    assert before == (_digest(tmp_path / "prolific"), _digest(tmp_path / "prolific-site"),
                      _digest(tmp_path / "market")), "the audit changed a file it read"
    assert state.studies == {sid} and state.charged_minor == 260 and state.ledger_spent == Decimal("2.60")
    assert sorted(state.decisions) == sorted([(a_sub, "APPROVE", "researcher"), (b_sub, "REJECT", "researcher")])
    assert state.bonus_payments[a_sub] == [50] and state.bonus_intents == [(a_sub, 50)]
    assert len(state.served) == 4 and set(state.market_hits) == {h.hit_id for h in hits}
    assert check(state) == []

    # Now do, behind the journal's back, each thing the audit is there to catch.
    em = start_emulator(tmp_path / "prolific", clock, fee_rate=Decimal("0.3"))
    try:
        api = ProlificClient(em.base_url, em.token, max_retries=0)
        api.approve(a_sub)  # a second decision: Prolific ignores it, the log keeps it
        batch = next(iter(gather(**files, store=store, campaign="c").batches_paid))
        api.pay_bonus(batch)  # a second pay call pays again
    finally:
        em.stop()
    with sqlite3.connect(files["door_db"]) as d:
        d.execute("INSERT INTO served VALUES ('X0', ?, ?, ?, ?, 'lost')", (a_sub, alice.id, sid, hits[1].hit_id))  # unanswered: fine
        d.execute("INSERT INTO served VALUES ('X1', ?, ?, ?, ?, 'submitted')", (a_sub, alice.id, sid, hits[0].hit_id))
    with store.session() as s:
        s.add(HitRow(campaign="c", stage="likert", hit_key="likert-0009", item_keys="[]", annotation="a9", token="t9",
                     status="posted", reward="0.00", assignments=2, hit_id="NOSUCHHIT"))
    found = check(gather(**files, store=store, campaign="c"))
    store.close()
    kinds = sorted(f.check for f in found)
    assert kinds == ["bonus_paid_twice", "bonus_paid_twice", "decided_twice", "ledger_mismatch", "served_twice", "unknown_hit"], found
