"""`campaign forget`: a person's ids and free text leave the store; labels and every ledger amount stay.

A hand-made store with what a run leaves about a worker: two campaigns, assignments with a comment in
the raw answer, nugget judgments with keywords, worker rows, events naming them, a review snapshot and a
paid bonus (whose ledger refs and kv key carry the worker id)."""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal

import pytest
from sqlmodel import select

from campaign.answer_xml import build_answer_xml
from campaign.answers.export import answer_rows
from campaign.answers.forget import TOMBSTONE
from campaign.answers.pseudonyms import campaign_secret, pseudonym
from campaign.ledger import charge_assignment, charge_bonus, reserve_bonus, reserve_hit, totals
from campaign.store import AssignmentRow, CampaignRow, EventRow, JudgmentRow, KVRow, LedgerRow, Store, WorkerRow
from tests.support.cli import cli

WHO = "A3KEEPMEPRIVATE"
OTHER = "A1SOMEONEELSE"
PARTICIPANT = "5f0c1a2b3c4d5e6f7a8b9c0d"  # a Prolific participant: the task site knows them as AP + upper case
SPEC = {"stages": [{"name": "nuggets", "kind": "nuggets"}], "instance": "abc"}


def build(state, db: str | None = None) -> None:
    store = Store.open(state, db)
    with store.session() as s:
        for camp in ("one", "two"):
            s.add(CampaignRow(name=camp, fingerprint="f", spec_json=json.dumps(SPEC), budget="10.00"))
            reserve_hit(s, camp, Decimal("10.00"), "nuggets-00000", Decimal("0.07"), 3)
            for k, w in enumerate((WHO, OTHER, "AP" + PARTICIPANT.upper())):
                aid = f"{camp}ASSIGN{k}"
                fields = [("nuggets", "[[0, 0, 2]]" if k else "[]"), ("keywords", "" if k else "my own words"),
                          ("comment", f"hello from {w}")]
                s.add(AssignmentRow(assignment_id=aid, campaign=camp, stage="nuggets", hit_key="nuggets-00000", hit_id="H1",
                                    worker_id=w, status="approved", answer_xml=build_answer_xml(fields),
                                    accept_time=1000.0, submit_time=1060.0 + k))
                extra = {"spans": [[0, 2]]} if k else {"spans": [], "keywords": ["my", "own"]}
                s.add(JudgmentRow(campaign=camp, stage="nuggets", assignment_id=aid, worker_id=w, item_key="d.s0",
                                  value=float(bool(k)), extra=json.dumps(extra, sort_keys=True)))
                s.add(WorkerRow(campaign=camp, worker_id=w, assignments=1, reason=f"{w}: careful",
                                evidence=json.dumps({"worker": w, "labels": 1})))
                charge_assignment(s, camp, "nuggets-00000", aid, Decimal("0.07"), 3)
            reserve_bonus(s, camp, Decimal("10.00"), WHO, Decimal("0.50"), f"{camp}ASSIGN0")
            charge_bonus(s, camp, WHO, Decimal("0.50"), f"{camp}ASSIGN0")
            s.add(KVRow(campaign=camp, key=f"bonus:{WHO}", value="paid"))
            s.add(KVRow(campaign=camp, key="review:nuggets", value=json.dumps({"workers": {WHO: "bonus", OTHER: "keep"}})))
            s.add(EventRow(campaign=camp, kind="bonus", subject=WHO, message=f"{WHO}: $0.50 bonus",
                           data=json.dumps({"worker": WHO})))
    store.close()


def money(state, db: str | None = None) -> dict:
    store = Store.open(state, db)
    with store.session() as s:
        rows = sorted((r.campaign, r.kind, r.amount, r.fee, r.assignment_id or "", r.hit_key or "")
                      for r in s.exec(select(LedgerRow)).all())
        sums = {c: totals(s, c, Decimal("10.00")) for c in ("one", "two")}
    store.close()
    return {"rows": rows, "totals": {c: (t.spent, t.reserved, t.fees) for c, t in sums.items()}}


def store_text(state) -> tuple[str, bytes]:
    con = sqlite3.connect(state / "campaign.db")
    dump = "\n".join(con.iterdump())
    con.close()
    raw = b"".join(p.read_bytes() for p in state.glob("campaign.db*"))
    return dump, raw


def test_forget_removes_the_id_everywhere_and_keeps_the_money_to_the_cent(tmp_path, capsys):
    state = tmp_path / "state"
    build(state)
    before = money(state)
    assert before["totals"]["one"][0] == Decimal("0.84")  # three $0.08 charges and a $0.60 bonus, fees included
    assert WHO in store_text(state)[0]
    assert cli("forget", WHO, "--state", str(state)) == 0
    out = capsys.readouterr().out
    dump, raw = store_text(state)
    assert WHO not in dump and WHO.encode() not in raw  # not in any row, nor left in the file's free pages
    assert money(state) == before  # every ledger row's amount, fee and reference to its assignment, to the cent
    store = Store.open(state)
    with store.session() as s:
        mine = s.exec(select(AssignmentRow).where(AssignmentRow.assignment_id == "oneASSIGN0")).one()
        tomb = mine.worker_id
        assert tomb.startswith(TOMBSTONE) and f"one: now {tomb}" in out
        assert mine.answer_xml == "" and "my own words" not in dump  # the raw answer with its comment
        j = s.exec(select(JudgmentRow).where(JudgmentRow.assignment_id == "oneASSIGN0")).one()
        assert (j.worker_id, j.value, json.loads(j.extra)) == (tomb, 0.0, {"spans": []})  # the label stays
        refs = set(s.exec(select(LedgerRow.ref).where(LedgerRow.campaign == "one")).all())
        assert {f"bonus_reserve:{tomb}", f"bonus_charge:{tomb}"} <= refs
        assert s.exec(select(KVRow.value).where(KVRow.campaign == "one", KVRow.key == f"bonus:{tomb}")).one() == "paid"
        other = s.exec(select(AssignmentRow).where(AssignmentRow.assignment_id == "oneASSIGN1")).one()
        assert other.worker_id == OTHER and "hello from" in other.answer_xml  # nobody else is touched
        two = s.exec(select(WorkerRow.worker_id).where(WorkerRow.campaign == "two", WorkerRow.worker_id.startswith(TOMBSTONE))).one()
        assert two != tomb  # one tombstone per campaign: the two campaigns' rows cannot be joined on it
        assert s.exec(select(EventRow).where(EventRow.kind == "forgotten")).all()
    store.close()
    assert cli("forget", WHO, "--state", str(state)) == 2  # nothing left to forget
    assert "nothing was changed" in capsys.readouterr().err


def test_a_prolific_participant_id_or_an_export_pseudonym_finds_the_person(tmp_path, capsys):
    state = tmp_path / "state"
    build(state)
    assert cli("forget", PARTICIPANT, "--state", str(state), "--campaign", "one") == 0
    dump, _ = store_text(state)
    assert dump.count(PARTICIPANT.upper()) > 0  # campaign two was not asked for
    store = Store.open(state)
    rows = list(answer_rows(store, "one", raw_ids=True))
    assert not any(PARTICIPANT.upper() in r["worker"] for r in rows)
    named = pseudonym(campaign_secret(store, "two"), OTHER)
    store.close()
    assert cli("forget", named, "--state", str(state)) == 0
    store = Store.open(state)
    with store.session() as s:
        assert s.exec(select(WorkerRow).where(WorkerRow.campaign == "two", WorkerRow.worker_id == OTHER)).first() is None
        assert s.exec(select(WorkerRow).where(WorkerRow.campaign == "one", WorkerRow.worker_id == OTHER)).first() is None
    store.close()


def test_pseudonyms_are_stable_per_campaign_and_keyed(tmp_path):
    state = tmp_path / "state"
    build(state)
    store = Store.open(state)
    first = {r["assignment"]: r["worker"] for r in answer_rows(store, "one")}
    again = {r["assignment"]: r["worker"] for r in answer_rows(store, "one")}
    two = {r["worker"] for r in answer_rows(store, "two")}
    raw = {r["assignment"]: r["worker"] for r in answer_rows(store, "one", raw_ids=True)}
    store.close()
    assert first == again and raw["oneASSIGN0"] == WHO
    assert not set(first.values()) & two  # different campaigns, different pseudonyms
    assert all(v.startswith("w-") and WHO not in v for v in first.values())
    import hashlib

    assert first["oneASSIGN0"][2:] not in hashlib.sha256(WHO.encode()).hexdigest()  # keyed, not a plain hash


@pytest.mark.parametrize("bad", ["A1", "forgotten-0123456789ab"])
def test_refuses_what_cannot_be_a_person(tmp_path, capsys, bad):
    state = tmp_path / "state"
    build(state)
    assert cli("forget", bad, "--state", str(state)) == 2
    assert "campaign forget:" in capsys.readouterr().err


def test_forget_on_an_empty_folder_creates_nothing(tmp_path, capsys):
    assert cli("forget", WHO, "--state", str(tmp_path / "state")) == 2
    assert not (tmp_path / "state").exists()


@pytest.mark.postgres
def test_forget_on_postgresql(tmp_path, pg_url, capsys):
    build(tmp_path, pg_url)
    before = money(tmp_path, pg_url)
    assert cli("forget", WHO, "--db", pg_url) == 0
    assert money(tmp_path, pg_url) == before
    store = Store.open(tmp_path, pg_url)
    with store.session() as s:
        conn = s.connection()
        for table in ("assignments", "judgments", "workers", "events", "kv", "ledger", "campaigns"):
            cells = conn.exec_driver_sql(f"SELECT * FROM {table}").all()
            assert not any(WHO in str(v) for row in cells for v in row), table
        assert conn.exec_driver_sql("SELECT count(*) FROM assignments WHERE worker_id LIKE 'forgotten-%%'").scalar() == 2
    store.close()


def test_forget_refuses_while_a_daemon_runs_on_the_store(tmp_path, capsys):
    from campaign.runlock import state_lock

    state = tmp_path / "state"
    build(state)
    with state_lock(state):  # what `campaign run` holds
        assert cli("forget", WHO, "--state", str(state)) == 2
    assert "already running" in capsys.readouterr().err
    assert WHO in store_text(state)[0]  # nothing was changed
    assert cli("forget", WHO, "--state", str(state)) == 0


@pytest.mark.postgres
def test_forget_refuses_while_a_daemon_holds_a_lease_on_a_shared_store(tmp_path, pg_url, capsys):
    import time

    from campaign.leases import LeaseRow

    build(tmp_path, pg_url)
    store = Store.open(tmp_path, pg_url)
    with store.session() as s:
        s.add(LeaseRow(campaign="one", holder="host:123:abc", expires_at=time.time() + 600, acquired_at=time.time()))
    store.close()
    assert cli("forget", WHO, "--db", pg_url) == 2
    assert "host:123:abc" in capsys.readouterr().err


@pytest.mark.parametrize("word", ["careful", "approved", "nuggets", "paid"])
def test_a_word_that_is_no_persons_id_changes_nothing(tmp_path, capsys, word):
    """`campaign forget water-bottles` (a campaign's name given by mistake) renamed the campaign in every table;
    `forget approved` would have rewritten every assignment's status: only a person's id is erased."""
    state = tmp_path / "state"
    build(state)
    before = store_text(state)[0]
    assert cli("forget", word, "--state", str(state)) == 2
    err = capsys.readouterr().err
    assert f"{word!r} is no worker or participant of any campaign" in err and "nothing was changed" in err
    assert store_text(state)[0] == before


def test_a_campaign_named_like_the_person_keeps_its_name(tmp_path, capsys):
    state = tmp_path / "state"
    build(state)
    con = sqlite3.connect(state / "campaign.db")
    tables = [r[0] for r in con.execute("SELECT m.name FROM sqlite_master m WHERE m.type = 'table'")]
    for table in tables:  # campaign "two" becomes "pilot-<the person's id>" everywhere
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        col = "campaign" if "campaign" in cols else "name" if table == "campaigns" else None
        if col:
            con.execute(f"UPDATE {table} SET {col} = ? WHERE {col} = 'two'", (f"pilot-{WHO}",))
    con.commit()
    con.close()
    assert cli("forget", WHO, "--state", str(state)) == 0
    store = Store.open(state)
    with store.session() as s:
        assert sorted(s.exec(select(CampaignRow.name)).all()) == ["one", f"pilot-{WHO}"]
        assert s.exec(select(AssignmentRow).where(AssignmentRow.campaign == f"pilot-{WHO}")).all()
        assert not s.exec(select(WorkerRow).where(WorkerRow.worker_id == WHO)).all()
    store.close()
