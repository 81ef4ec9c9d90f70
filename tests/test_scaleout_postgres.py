"""Several daemons on one PostgreSQL store: four campaigns on the built-in marketplace and one on
Prolific, two daemons, one killed mid-run.

Both daemons share one marketplace (`campaign market serve`, as a separate process, serving the
Prolific door too: `--prolific-door`), one Prolific (the emulator standalone, `campaign prolific serve`)
and one simulated crowd (`campaign crowd run`, playing the Prolific participants as well), as they
would on two machines. The daemon holding the Prolific campaign is killed; the survivor must take its
campaigns over once their leases expire and finish all five; the store must agree with the marketplace
(nothing posted twice, nothing lost, every approval booked once, the books balance), the Prolific audit
must find nothing (no submission decided twice, no bonus paid twice, nobody served a HIT twice, the
ledger equal to the emulator's charges), and the four local campaigns' scores must equal those of a
single daemon running them with the same seed.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

import boto3
import pytest
from sqlmodel import select

from campaign.credentials import read_credentials_file
from campaign.leases import PRESENCE, LeaseRow
from campaign.money import assignment_cost
from campaign.prolific.audit import check, gather
from campaign.store import AssignmentRow, CampaignRow, HitRow, LedgerRow, Store
from tests.prolific.standalone import standalone_emulator
from tests.support.cli import clean_env, cli_output, start_campaign
from tests.support.specs import TOPIC, campaign, simulated
from tests.support.specs import write_spec as write_campaigns

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BALANCE = Decimal("10000.00")
NAMES = ["alpha", "beta", "gamma", "delta"]
PROLIFIC = "epsilon"  # on Prolific: the emulator standalone, the door in the shared marketplace
SPEED = 3600.0

TASK = {"kind": "likert", "reward": "0.06", "auto_approval_delay": "30d", "duration": "8h",
        "traps": {"share": 0.25, "texts": ["This sentence is not important.", "Barack Obama graduated from Harvard Law."]}}


# Workers arrive over 12 simulated hours (12 s at SPEED), so each campaign runs long enough for the two
# daemons to divide them and for one to be killed while it works its share: the kill comes at the Prolific
# campaign's first answer (4-16 s into the run, whatever the span), and in each of three runs the daemon
# killed still held unfinished local campaigns too (over 20 hours each of the two runs took ~7 s longer).
# An assignment may take 8 simulated hours (8 s): the default 30 minutes are half a second at SPEED, and
# a simulated worker stalled that long by a loaded machine abandoned its HIT in one run and not in the
# other, so another worker answered it and the scores differed for a reason that has nothing to do with
# the daemons.


def write_spec(path: Path, endpoint: str, prolific: bool = True) -> Path:
    local = [campaign(n, topic=f"{TOPIC} ({n})", marketplace="local", endpoint_url=endpoint, task=TASK, budget="30.00",
                      crowd=simulated(25, speed=SPEED, arrival_span="12h")) for n in NAMES]
    if prolific:  # the task site is the shared marketplace: its endpoint for the daemons, its worker site for participants
        local.append(campaign(PROLIFIC, topic=f"{TOPIC} ({PROLIFIC})", marketplace="prolific", endpoint_url=endpoint,
                              task={"kind": "likert", "assignments": 3, "duration": "8h"}, budget="30.00",
                              prolific={"reward": "0.75", "bundle": 5, "estimated_minutes": 5, "maximum_minutes": 240,
                                        "filters": {"approval_rate": 90, "countries": ["GB", "US"]},
                                        "fee_rate": "0.333", "vat_rate": "0.2"},
                              task_site={"public_url": endpoint}, crowd=simulated(20, speed=SPEED, arrival_span="12h")))
    return write_campaigns(path, *local)


def _env(market_state: Path | None = None, prolific: dict[str, str] | None = None) -> dict[str, str]:
    """A daemon reaches a marketplace it did not start with that marketplace's requester credentials,
    as a user gives them: AWS_SHARED_CREDENTIALS_FILE pointing at the file `campaign market serve` wrote;
    and Prolific (the emulator) with PROLIFIC_TOKEN and PROLIFIC_BASE_URL."""
    return clean_env(["AWS_*", "PROLIFIC_*"], **({"AWS_SHARED_CREDENTIALS_FILE": str(market_state / "credentials")} if market_state else {}),
                     **(prolific or {}))


def _campaign(*args: str, market_state: Path | None = None, prolific: dict[str, str] | None = None, **kw) -> subprocess.Popen:  # type: ignore[no-untyped-def]
    return start_campaign(*args, env=_env(market_state, prolific), **kw)


@contextmanager
def shared_market(tmp: Path, seed: int, db: str, prolific: bool = True) -> Iterator[tuple[str, Path, dict[str, str]]]:
    """`campaign prolific serve`, `campaign market serve --prolific-door` and `campaign crowd run` as their
    own processes; yields (endpoint, spec, the Prolific environment). Their messages go to files in `tmp`
    (a pipe nobody reads fills up and stalls the writer)."""
    tmp.mkdir(parents=True, exist_ok=True)
    with (tmp / "market.log").open("w") as market_log, (tmp / "crowd.log").open("w") as crowd_log, \
            (tmp / "emulator.log").open("w") as em_log, \
            standalone_emulator(tmp / "prolific", "--speed", str(SPEED), "--fee-rate", "0.333", "--vat-rate", "0.2", log=em_log) as em:
        # the spec first, on a port chosen here: the door reads it (`--door-config`) to refuse unreadable answers
        port = _free_port()
        spec = write_spec(tmp / "campaigns.yaml", f"http://127.0.0.1:{port}", prolific)
        door = ["--prolific-door", "--door-db", db, "--door-config", str(spec)] if prolific else []
        market = _campaign("market", "serve", "--port", str(port), "--state", str(tmp / "market"), "--mode", "prod",
                           "--balance", str(BALANCE), "--speed", str(SPEED), *door, prolific=em, stdout=subprocess.PIPE,
                           stderr=market_log, text=True)
        crowd = None
        try:
            assert market.stdout is not None
            endpoint = market.stdout.readline().strip()
            assert endpoint == f"http://127.0.0.1:{port}", (tmp / "market.log").read_text() or endpoint
            crowd = _campaign("crowd", "run", "--config", str(spec), "--endpoint", endpoint, "--seed", str(seed),
                              "--market-state", str(tmp / "market"), "--prolific-token-file", str(tmp / "prolific" / "token"),
                              prolific={"PROLIFIC_BASE_URL": em["PROLIFIC_BASE_URL"]}, stdout=subprocess.DEVNULL,
                              stderr=crowd_log, text=True)
            yield endpoint, spec, em
        finally:
            for p in (crowd, market):
                if p is not None and p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                    p.wait(timeout=30)
            if market.stdout is not None:
                market.stdout.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def daemon(spec: Path, state: Path, db: str, seed: int, prolific: dict[str, str], ttl: str = "5") -> subprocess.Popen:
    return _campaign("run", "--config", str(spec), "--state", str(state), "--db", db, "--seed", str(seed), "--quiet",
                     "--lease-ttl", ttl, market_state=spec.parent / "market", prolific=prolific, stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE, text=True)


def scores(db: str, tmp: Path) -> dict[str, bytes]:
    """Each local campaign's `campaign export`, run in this process (`cli_output`: it starts no daemon, and a
    new interpreter for each of the eight exports cost a second or more)."""
    out = {}
    for name in NAMES:
        f = tmp / f"{name}.csv"
        proc = cli_output("export", name, "--db", db, "--state", str(tmp / "x"), "--out", str(f))
        assert proc.returncode == 0, proc.stderr
        out[name] = f.read_bytes()
    return out


def audit(endpoint: str, db: str, tmp: Path, names: list[str]) -> None:
    """The store against the marketplace, for the local campaigns at once (as tests/test_e2e.py does for
    one): the Prolific campaign's HITs on the same marketplace are free (Prolific pays) and left to
    `prolific_audit`; every campaign of `names` finished."""
    creds = read_credentials_file(tmp / "market" / "credentials", "default")
    client = boto3.client("mturk", region_name="us-east-1", endpoint_url=endpoint,
                          aws_access_key_id=creds.access_key_id, aws_secret_access_key=creds.secret_access_key)
    store = Store.open(tmp / "audit", db)
    with store.session() as s:
        local_hits = [h for h in s.exec(select(HitRow)).all() if h.campaign in NAMES]
        local = {a.assignment_id: a for a in s.exec(select(AssignmentRow)).all() if a.campaign in NAMES}
        ledger = [e for e in s.exec(select(LedgerRow)).all() if e.campaign in NAMES]
        statuses = {c.name: c.status for c in s.exec(select(CampaignRow)).all()}
    store.close()
    assert statuses == dict.fromkeys(names, "finished")
    # Prolific's HITs are the ones posted free (`ProlificMarketplace.create_hit_type`: Prolific pays the places);
    # the task site still takes its minimum commission on each of their approved answers (nobody books
    # that: the task site's account is no one's money), which the balance below leaves out
    every = [h for page in client.get_paginator("list_hits").paginate(PaginationConfig={"PageSize": 100}) for h in page["HITs"]]
    hits = [h for h in every if Decimal(h["Reward"]) > 0]
    site_fees = Decimal("0.00")
    for h in every:
        if Decimal(h["Reward"]) == 0:
            approved = [a for page in client.get_paginator("list_assignments_for_hit").paginate(
                HITId=h["HITId"], AssignmentStatuses=["Approved"], PaginationConfig={"PageSize": 100}) for a in page["Assignments"]]
            site_fees += assignment_cost(Decimal("0.00"), int(h["MaxAssignments"])) * len(approved)
    remote = {}
    for h in hits:
        for page in client.get_paginator("list_assignments_for_hit").paginate(
                HITId=h["HITId"], AssignmentStatuses=["Submitted", "Approved", "Rejected"], PaginationConfig={"PageSize": 100}):
            for a in page["Assignments"]:
                remote[a["AssignmentId"]] = a
    balance = Decimal(client.get_account_balance()["AvailableBalance"])
    annotations = [h["RequesterAnnotation"] for h in hits]
    assert len(annotations) == len(set(annotations)), "a HIT was posted twice"
    assert len(hits) == len(local_hits) == len({h.hit_id for h in local_hits}) == 4 * 12
    assert {h.campaign for h in local_hits} == set(NAMES)
    assert set(remote) == set(local), "an assignment was lost (or invented)"
    for aid, a in remote.items():
        assert local[aid].status == a["AssignmentStatus"].lower()
    charges = [e for e in ledger if e.kind == "charge"]
    assert len(charges) == len({e.assignment_id for e in charges}), "an approval was booked twice"
    assert sorted(e.assignment_id for e in charges) == sorted(aid for aid, a in remote.items() if a["AssignmentStatus"] == "Approved")
    assert BALANCE - balance - site_fees == sum(Decimal(e.amount) for e in charges), "ledger and marketplace disagree"
    reserved = sum(Decimal(e.amount) * (1 if e.kind == "reserve" else -1) for e in ledger if e.kind in ("reserve", "charge", "release"))
    assert reserved == 0, "money still reserved after the campaigns finished"


def prolific_audit(db: str, tmp: Path) -> None:
    """`campaign.prolific.audit` on the Prolific campaign: the emulator's records, the door's table and the
    task site's assignments (both in the shared marketplace's folder) against the store."""
    store = Store.open(tmp / "audit", db)
    try:
        facts = gather(emulator_db=tmp / "prolific" / "prolific.db", door_db=tmp / "market" / "prolific-site" / "prolific-site.sqlite",
                       market_db=tmp / "market" / "market.db", store=store, campaign=PROLIFIC)
    finally:
        store.close()
    # Paid work is either a completed bundle's reward or, for a place given back when the study's work ran
    # out mid-bundle, a bonus per HIT done (`ProlificMarketplace.pay_work`). Which of the two a run gets
    # depends on how the participants' arrivals interleave: in one CI run on a loaded machine every worked
    # place ended mid-bundle (6 paid by bonus, none by reward), so either counts as something to check.
    paid = facts.reward_charges or [sub for sub, bonuses in facts.bonus_payments.items() if bonuses]
    assert facts.studies and paid, "no Prolific submission was paid: the audit checked nothing"
    assert check(facts) == [], check(facts)


def leases(db: str, tmp: Path) -> dict[str, str]:
    store = Store.open(tmp / "leases", db)
    now = time.time()
    with store.session() as s:
        rows = s.exec(select(LeaseRow)).all()
    store.close()
    return {r.campaign: r.holder for r in rows if r.expires_at >= now and not r.campaign.startswith(PRESENCE)}


def running_campaigns(db: str, tmp: Path) -> set[str]:
    store = Store.open(tmp / "leases", db)
    with store.session() as s:
        names = {c.name for c in s.exec(select(CampaignRow)).all() if c.status == "running"}
    store.close()
    return names


def started(db: str, tmp: Path, names: set[str], least: int = 5) -> bool:
    store = Store.open(tmp / "leases", db)
    with store.session() as s:
        n = len(s.exec(select(AssignmentRow.assignment_id).where(AssignmentRow.campaign.in_(names))).all())  # type: ignore[attr-defined]
    store.close()
    return n >= least


def test_two_daemons_one_killed_the_other_finishes_all_five(tmp_path: Path, pg_server_session) -> None:  # type: ignore[no-untyped-def]
    seed = 5
    ref_db, db = pg_server_session.create_database(), pg_server_session.create_database()
    # the reference: one daemon alone, the four local campaigns, same seed, its own marketplace and crowd
    with shared_market(tmp_path / "ref", seed, ref_db, prolific=False) as (_, spec, em):
        one = daemon(spec, tmp_path / "ref" / "state", ref_db, seed, em)
        _, err = one.communicate(timeout=300)
        assert one.returncode == 0, err[-3000:]
    expected = scores(ref_db, tmp_path / "ref")

    everyone = [*NAMES, PROLIFIC]
    with shared_market(tmp_path / "two", seed, db) as (endpoint, spec, em):
        a = daemon(spec, tmp_path / "two" / "a", db, seed, em)
        b = None
        try:
            time.sleep(1.0)
            b = daemon(spec, tmp_path / "two" / "b", db, seed, em)
            holders: dict[str, str] = {}
            victim = survivor = None
            doomed: set[str] = set()
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:  # the Prolific campaign's holder gets to work, then dies
                holders = leases(db, tmp_path)
                held = {p: {n for n, h in holders.items() if f":{p.pid}:" in h} for p in (a, b)}
                owner = next((p for p in (a, b) if PROLIFIC in held[p]), None)
                # the Prolific campaign is small and its participants are all there when its study opens:
                # it is killed at its first answer, while the campaign is surely mid-run
                if owner is not None and started(db, tmp_path, {PROLIFIC}, least=1):
                    victim, survivor = owner, (b if owner is a else a)
                    break
                time.sleep(0.1)
            else:
                said = {}
                for name, p in (("a", a), ("b", b)):
                    if p.poll() is None:
                        p.kill()
                    said[name] = f"exit {p.wait()}: " + (p.communicate()[1] or "")[-2000:]
                pytest.fail(f"the daemons did not divide the campaigns: {holders}; a {said['a']}; b {said['b']}")
            assert victim is not None and survivor is not None
            assert b.poll() is None and a.poll() is None
            victim.send_signal(signal.SIGKILL)  # mid-run: what it held and had not finished is the survivor's to take
            victim.wait()
            doomed = held[victim] & running_campaigns(db, tmp_path)
            assert PROLIFIC in doomed, "the Prolific campaign finished before its daemon was killed"
            _, err = survivor.communicate(timeout=300)
            assert survivor.returncode == 0, err[-3000:]
        finally:
            for p in (a, b):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
        audit(endpoint, db, tmp_path / "two", everyone)
        prolific_audit(db, tmp_path / "two")
    assert scores(db, tmp_path / "two") == expected
    store = Store.open(tmp_path / "check", db)
    with store.session() as s:
        from campaign.store import EventRow

        taken = [e for e in s.exec(select(EventRow).where(EventRow.kind == "lease")).all() if e.campaign in doomed]
    store.close()
    assert {e.campaign for e in taken if f":{survivor.pid}:" in e.message} == doomed, "the survivor did not take the campaigns over"
