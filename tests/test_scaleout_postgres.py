"""Several daemons on one PostgreSQL store: four campaigns, two daemons, one killed mid-run.

Both daemons share one marketplace (`campaign market serve`, as a separate process) and one simulated
crowd (`campaign crowd run`), as they would on two machines. The survivor must take the dead daemon's
campaigns over once their leases expire and finish all four; the store must agree with the marketplace
(nothing posted twice, nothing lost, every approval booked once, the books balance) and the scores must
equal those of a single daemon running the same spec with the same seed.
"""

from __future__ import annotations

import signal
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
from campaign.store import AssignmentRow, CampaignRow, HitRow, LedgerRow, Store
from tests.support.cli import clean_env, run_campaign, start_campaign
from tests.support.specs import TOPIC, campaign, simulated
from tests.support.specs import write_spec as write_campaigns

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BALANCE = Decimal("10000.00")
NAMES = ["alpha", "beta", "gamma", "delta"]
SPEED = 3600.0

TASK = {"kind": "likert", "reward": "0.06", "auto_approval_delay": "30d", "duration": "8h",
        "traps": {"share": 0.25, "texts": ["This sentence is not important.", "Barack Obama graduated from Harvard Law."]}}


# Workers arrive over 40 simulated hours (40 s at SPEED), so each campaign runs long enough for the two
# daemons to divide them and for one to be killed while it works its share. An assignment may take 8
# simulated hours (8 s): the default 30 minutes are half a second at SPEED, and a simulated worker
# stalled that long by a loaded machine abandoned its HIT in one run and not in the other, so another
# worker answered it and the scores differed for a reason that has nothing to do with the daemons.


def write_spec(path: Path, endpoint: str) -> Path:
    return write_campaigns(path, *(campaign(n, topic=f"{TOPIC} ({n})", marketplace="local", endpoint_url=endpoint, task=TASK,
                                            budget="30.00", crowd=simulated(25, speed=SPEED, arrival_span="40h")) for n in NAMES))


def _env(market_state: Path | None = None) -> dict[str, str]:
    """A daemon reaches a marketplace it did not start with that marketplace's requester credentials,
    as a user gives them: AWS_SHARED_CREDENTIALS_FILE pointing at the file `campaign market serve` wrote."""
    return clean_env(["AWS_*"], **({"AWS_SHARED_CREDENTIALS_FILE": str(market_state / "credentials")} if market_state else {}))


def _campaign(*args: str, market_state: Path | None = None, **kw) -> subprocess.Popen:  # type: ignore[no-untyped-def]
    return start_campaign(*args, env=_env(market_state), **kw)


@contextmanager
def shared_market(tmp: Path, seed: int) -> Iterator[tuple[str, Path]]:
    """`campaign market serve` and `campaign crowd run` as their own processes; yields (endpoint, spec).
    Their messages go to files in `tmp` (a pipe nobody reads fills up and stalls the writer)."""
    tmp.mkdir(parents=True, exist_ok=True)
    with (tmp / "market.log").open("w") as market_log, (tmp / "crowd.log").open("w") as crowd_log:
        market = _campaign("market", "serve", "--port", "0", "--state", str(tmp / "market"), "--mode", "prod",
                           "--balance", str(BALANCE), "--speed", str(SPEED), stdout=subprocess.PIPE, stderr=market_log,
                           text=True)
        crowd = None
        try:
            assert market.stdout is not None
            endpoint = market.stdout.readline().strip()
            assert endpoint.startswith("http://127.0.0.1:"), (tmp / "market.log").read_text() or endpoint
            spec = write_spec(tmp / "campaigns.yaml", endpoint)
            crowd = _campaign("crowd", "run", "--config", str(spec), "--endpoint", endpoint, "--seed", str(seed),
                              "--market-state", str(tmp / "market"), stdout=subprocess.DEVNULL, stderr=crowd_log, text=True)
            yield endpoint, spec
        finally:
            for p in (crowd, market):
                if p is not None and p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                    p.wait(timeout=30)
            if market.stdout is not None:
                market.stdout.close()


def daemon(spec: Path, state: Path, db: str, seed: int, ttl: str = "5") -> subprocess.Popen:
    return _campaign("run", "--config", str(spec), "--state", str(state), "--db", db, "--seed", str(seed), "--quiet",
                     "--lease-ttl", ttl, market_state=spec.parent / "market", stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE, text=True)


def scores(db: str, tmp: Path) -> dict[str, bytes]:
    out = {}
    for name in NAMES:
        f = tmp / f"{name}.csv"
        proc = run_campaign("export", name, "--db", db, "--state", str(tmp / "x"), "--out", str(f), env=_env(), timeout=120)
        assert proc.returncode == 0, proc.stderr
        out[name] = f.read_bytes()
    return out


def audit(endpoint: str, db: str, tmp: Path) -> None:
    """The store against the marketplace, for all four campaigns at once (as tests/test_e2e.py does for one)."""
    creds = read_credentials_file(tmp / "market" / "credentials", "default")
    client = boto3.client("mturk", region_name="us-east-1", endpoint_url=endpoint,
                          aws_access_key_id=creds.access_key_id, aws_secret_access_key=creds.secret_access_key)
    hits = [h for page in client.get_paginator("list_hits").paginate(PaginationConfig={"PageSize": 100}) for h in page["HITs"]]
    remote = {}
    for h in hits:
        for page in client.get_paginator("list_assignments_for_hit").paginate(
                HITId=h["HITId"], AssignmentStatuses=["Submitted", "Approved", "Rejected"], PaginationConfig={"PageSize": 100}):
            for a in page["Assignments"]:
                remote[a["AssignmentId"]] = a
    balance = Decimal(client.get_account_balance()["AvailableBalance"])
    store = Store.open(tmp / "audit", db)
    with store.session() as s:
        local_hits = s.exec(select(HitRow)).all()
        local = {a.assignment_id: a for a in s.exec(select(AssignmentRow)).all()}
        ledger = s.exec(select(LedgerRow)).all()
        statuses = {c.name: c.status for c in s.exec(select(CampaignRow)).all()}
    store.close()
    assert statuses == dict.fromkeys(NAMES, "finished")
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
    assert BALANCE - balance == sum(Decimal(e.amount) for e in charges), "ledger and marketplace disagree"
    reserved = sum(Decimal(e.amount) * (1 if e.kind == "reserve" else -1) for e in ledger if e.kind in ("reserve", "charge", "release"))
    assert reserved == 0, "money still reserved after the campaigns finished"


def leases(db: str, tmp: Path) -> dict[str, str]:
    store = Store.open(tmp / "leases", db)
    now = time.time()
    with store.session() as s:
        rows = s.exec(select(LeaseRow)).all()
    store.close()
    return {r.campaign: r.holder for r in rows if r.expires_at >= now and not r.campaign.startswith(PRESENCE)}


def started(db: str, tmp: Path, names: set[str]) -> bool:
    store = Store.open(tmp / "leases", db)
    with store.session() as s:
        n = len(s.exec(select(AssignmentRow.assignment_id).where(AssignmentRow.campaign.in_(names))).all())  # type: ignore[attr-defined]
    store.close()
    return n >= 5


def test_two_daemons_one_killed_the_other_finishes_all_four(tmp_path: Path, pg_server_session) -> None:  # type: ignore[no-untyped-def]
    seed = 5
    ref_db, db = pg_server_session.create_database(), pg_server_session.create_database()
    # the reference: one daemon alone, same spec, same seed, its own marketplace and crowd
    with shared_market(tmp_path / "ref", seed) as (_, spec):
        one = daemon(spec, tmp_path / "ref" / "state", ref_db, seed)
        _, err = one.communicate(timeout=300)
        assert one.returncode == 0, err[-3000:]
    expected = scores(ref_db, tmp_path / "ref")

    with shared_market(tmp_path / "two", seed) as (endpoint, spec):
        a = daemon(spec, tmp_path / "two" / "a", db, seed)
        b = None
        try:
            time.sleep(1.0)
            b = daemon(spec, tmp_path / "two" / "b", db, seed)
            holders: dict[str, str] = {}
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:  # the two divide the campaigns; b gets to work on its own
                holders = leases(db, tmp_path)
                mine_b = {n for n, h in holders.items() if f":{b.pid}:" in h}
                if len(mine_b) == 2 and len(holders) == 4 and started(db, tmp_path, mine_b):
                    break
                time.sleep(0.2)
            else:
                said = {}
                for name, p in (("a", a), ("b", b)):
                    if p.poll() is None:
                        p.kill()
                    said[name] = f"exit {p.wait()}: " + (p.communicate()[1] or "")[-2000:]
                pytest.fail(f"the daemons did not divide the campaigns: {holders}; a {said['a']}; b {said['b']}")
            assert b.poll() is None and a.poll() is None
            b.send_signal(signal.SIGKILL)  # mid-run: b's campaigns have answers, none is finished
            b.wait()
            store = Store.open(tmp_path / "check", db)
            with store.session() as s:
                assert {c.name: c.status for c in s.exec(select(CampaignRow)).all() if c.name in mine_b} == dict.fromkeys(mine_b, "running")
            store.close()
            _, err = a.communicate(timeout=300)
            assert a.returncode == 0, err[-3000:]
        finally:
            for p in (a, b):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
        audit(endpoint, db, tmp_path / "two")
    assert scores(db, tmp_path / "two") == expected
    store = Store.open(tmp_path / "check", db)
    with store.session() as s:
        from campaign.store import EventRow

        taken = [e for e in s.exec(select(EventRow).where(EventRow.kind == "lease")).all() if e.campaign in mine_b]
    store.close()
    assert {e.campaign for e in taken if f":{a.pid}:" in e.message} == mine_b, "a did not take b's campaigns over"
