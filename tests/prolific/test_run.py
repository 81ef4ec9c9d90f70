"""`campaign run` on Prolific, end to end: the daemon as a subprocess, the emulator as Prolific, simulated
participants doing the work through the task site's door.

- `examples/prolific.yaml` (prolific-local, spammers in the crowd) finishes with scores; the spammers who
  worked are excluded, honest participants' submissions are approved on the emulator, no submission
  of an honest participant is rejected, and the ledger's spent total equals what the emulator charged
  (rewards, fees, VAT, bonuses) to the cent.
- `marketplace: prolific` (the real road: token from PROLIFIC_TOKEN, base URL from PROLIFIC_BASE_URL,
  pointed at an emulator this test starts) with participants the test drives: the campaign finishes,
  the token is nowhere in the state directory nor in the daemon's output, and every request the daemon
  sent and every answer follow Prolific's API description (where it is at hand).
"""

from __future__ import annotations

import csv
import json
import socket
import subprocess
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from sqlmodel import select

from campaign.clock import WallClock
from campaign.crowd.models import make_pool
from campaign.ledger import totals
from campaign.prolific.emulator.store import DocStore
from campaign.prolific.study import place_cost
from campaign.spec import load_spec
from campaign.store import AssignmentRow, EventRow, LedgerRow, Store, WorkerRow
from tests.prolific.contract import contract, find_spec, observer
from tests.prolific.support import diligent_participants, run_beside_crowd
from tests.support.cli import clean_env, run_args, run_campaign, start_campaign
from tests.support.paths import ROOT, WATER
from tests.support.specs import NO_CROWD, campaign, first_propositions, write_spec

pytestmark = [pytest.mark.prolific, pytest.mark.slow]

EXAMPLE = ROOT / "examples" / "prolific.yaml"


def _env(**extra: str) -> dict[str, str]:
    return clean_env(["PROLIFIC_*"], **extra)


def _emulator_charges(em_dir: Path) -> tuple[Decimal, list[dict], dict[str, str]]:
    """(everything the emulator charged, its submissions, participant id -> external id)."""
    charged, subs, people, _ = _emulator_records(em_dir)
    return charged, subs, people


def _emulator_records(em_dir: Path) -> tuple[Decimal, list[dict], dict[str, str], list[dict]]:
    """`_emulator_charges` and every decision that reached a submission (with its actor)."""
    db = DocStore(em_dir / "prolific.db")
    try:
        rewards, fees, vat = db.charged()
        subs = db.all("submission")
        people = {p["id"]: p.get("external_id", "") for p in db.all("participant")}
        moves = db.all("transition")
    finally:
        db.close()
    return Decimal(rewards + fees + vat) / 100, subs, people, moves


def test_example_runs_on_prolific_local_with_spam_excluded_and_the_ledger_equal_to_the_charges(tmp_path: Path) -> None:
    state = tmp_path / "state"
    started = time.monotonic()
    out = run_campaign(*run_args(EXAMPLE, state, "--max-seconds", "400", quiet=False), env=_env(), timeout=600)
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr[-3000:]
    assert "water-prolific: scores written to" in out.stdout
    # the study pays in pounds: the progress lines show pounds and not one amount in dollars
    assert "\u00a3" in out.stdout and "$" not in out.stdout, out.stdout[-2000:]
    campaign = load_spec(EXAMPLE).campaigns[0]
    with (state / campaign.name / "scores.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    n_props = sum(1 for _ in (WATER / "propositions.tsv").open(encoding="utf-8")) - 1
    assert len(rows) == n_props and sum(r["kept"] == "True" for r in rows) == 15

    charged, subs, people, moves = _emulator_records(state / "prolific")
    store = Store.open(state)
    try:
        with store.session() as s:
            t = totals(s, campaign.name, campaign.budget)
            ledger = s.exec(select(LedgerRow).where(LedgerRow.campaign == campaign.name)).all()
            workers = {w.worker_id: w for w in s.exec(select(WorkerRow).where(WorkerRow.campaign == campaign.name)).all()}
            assignments = s.exec(select(AssignmentRow).where(AssignmentRow.campaign == campaign.name)).all()
            worked = Counter(a.worker_id for a in assignments)
            used = sum(1 for a in assignments if a.status == "approved")
            messages = [e.message for e in s.exec(select(EventRow).where(EventRow.campaign == campaign.name)).all()]
    finally:
        store.close()
    assert not [m for m in messages if "$" in m] and any("budget \u00a360.00" in m for m in messages)
    # money: the ledger is what Prolific charged, to the cent; nothing left reserved
    assert t.spent == charged and t.reserved == Decimal("0.00"), (t, charged)
    assert t.spent <= campaign.budget
    charges = [e for e in ledger if e.kind == "charge"]
    approved = {s["id"] for s in subs if s["status"] == "APPROVED"}
    gone = {s["id"] for s in subs if s["status"] in ("RETURNED", "TIMED-OUT")}
    charged_subs = [e.assignment_id for e in charges]
    # one charge per approved submission, and one per returned or timed-out submission whose work was used
    assert len(charged_subs) == len(set(charged_subs)) and approved <= set(charged_subs) <= approved | gone
    # every submission decided by the researcher: none awaiting review, none approved by Prolific on its own
    assert {s["status"] for s in subs} <= {"APPROVED", "REJECTED", "RETURNED", "TIMED-OUT"}, Counter(s["status"] for s in subs)
    assert not [m for m in moves if m["actor"] != "researcher"]
    # pay follows the work used: places paid (a shorter bundle as its share) <= 1.05 x the places the
    # approved HITs fill
    place = campaign.prolific
    assert place is not None
    paid_places = sum((Decimal(e.amount) for e in charges), Decimal("0")) / place_cost(place)
    assert paid_places <= Decimal("1.05") * used / place.bundle, (paid_places, used)
    assert any(e.kind == "bonus_charge" for e in ledger)

    # who is who: the crowd registers each simulated worker under external id "sim:<worker id>"
    pool = {w.worker_id: w for w in make_pool(campaign.crowd.workers, 0, dict(campaign.crowd.mix),
                                              arrival_span=campaign.crowd.arrival_span)}
    site_id = {pid: "AP" + pid.upper() for pid in people}
    sim_of = {site_id[pid]: ext.split(":")[-1] for pid, ext in people.items() if ext.startswith("sim:")}
    assert set(sim_of.values()) <= set(pool)
    spam_workers = [wid for wid, sim in sim_of.items() if pool[sim].is_spammer and worked[wid]]
    honest = [wid for wid, sim in sim_of.items() if pool[sim].kind == "diligent" and worked[wid]]
    assert spam_workers and honest
    # spam excluded from the scores: quality control works on evidence (a spammer with a HIT or two and a
    # lucky correlation can pass; how many HITs each spammer gets depends on arrival timing), so the
    # claims are: every spammer with the evidence of two bundles is excluded, and spam's share of the
    # judgments kept is well below its share of all judgments
    spam_all = sum(worked[w] for w in spam_workers)
    spam_kept = sum(worked[w] for w in spam_workers if not workers[w].excluded)
    kept = sum(n for w, n in worked.items() if not workers[w].excluded)
    who = sorted((worked[w], workers[w].excluded) for w in spam_workers)
    assert all(workers[w].excluded for w in spam_workers if worked[w] >= 2 * campaign.prolific.bundle), who
    assert spam_kept / kept <= 0.6 * spam_all / sum(worked.values()), (spam_kept, kept, spam_all, sum(worked.values()), who)
    # honest participants: every submission they finished is approved on the emulator (one they returned
    # or that timed out is paid for the HITs of it that were used), none is rejected, none is excluded
    statuses: dict[str, Counter] = {w: Counter() for w in honest}
    for sub in subs:
        wid = site_id[sub["participant_id"]]
        if wid in honest:
            statuses[wid][sub["status"]] += 1
    assert all(set(c) <= {"APPROVED", "RETURNED", "TIMED-OUT"} for c in statuses.values()), statuses
    worked_for = {site_id[sub["participant_id"]] for sub in subs if sub["id"] in set(charged_subs)}
    paid = [w for w in honest if w in worked_for]  # a whole bundle approved, or a shorter one's HITs paid
    assert len(paid) >= 0.8 * len(honest), statuses
    assert not any(workers[w].excluded for w in honest)
    # webhooks first: the calls the daemon's client made per submission, as `status --json` gives them
    status = run_campaign("status", "--state", str(state), "--json", env=_env(), timeout=120)
    usage = next(c for c in json.loads(status.stdout)["campaigns"] if c["name"] == campaign.name)["prolific"]
    assert usage["webhooks"] is True and usage["submissions"] == len(subs), usage
    assert usage["api_calls"] <= 5 * usage["submissions"], usage
    assert (f"water-prolific: Prolific API calls: {usage['api_calls']} for {usage['submissions']} submissions "
            f"({usage['api_calls'] / usage['submissions']:.1f} per submission; webhooks on)") in out.stdout
    print(f"example run: {took:.1f} s; spent {t.spent} = charged {charged}; {len(approved)} approved submissions; "
          f"places paid {paid_places:.2f} for {used} approved HITs; "
          f"spam {spam_all} of {sum(worked.values())} judgments, {spam_kept} of the {kept} kept; spammers (HITs, excluded): {who}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def real_road(port: int) -> dict:
    """`marketplace: prolific` (the real road) with the task site on `port`, no crowd: the test drives participants."""
    prolific = {"reward": "1.00", "bundle": 2, "estimated_minutes": 5, "maximum_minutes": 30,
                "filters": {"approval_rate": 90, "countries": ["US", "GB"], "languages": ["English"]},
                "fee_rate": "0.333", "vat_rate": "0.2"}
    return campaign("real-road", task={"kind": "likert", "assignments": 2}, marketplace="prolific", prolific=prolific,
                    task_site={"public_url": f"http://127.0.0.1:{port}"}, budget="20.00", propositions="props.tsv", crowd=NO_CROWD,
                    poll_interval=0.3)


def test_real_prolific_road_reads_the_token_from_the_environment_only(tmp_path: Path) -> None:
    from campaign.prolific.emulator.server import start_emulator

    first_propositions(tmp_path, 10)
    port = _free_port()
    spec = write_spec(tmp_path / "campaigns.yaml", real_road(port))
    em = start_emulator(tmp_path / "prolific.com", WallClock(), fee_rate=Decimal("0.333"), vat_rate=Decimal("0.2"),
                        deliver_hooks=True)  # webhooks sent to the daemon's task site, as Prolific sends them
    described = contract() if find_spec() is not None else None  # every request of the daemon, every answer
    if described is not None:
        em.app.observers.append(observer(described))
    state = tmp_path / "state"
    proc = start_campaign(*run_args(spec, state, "--market-port", str(port), "--log-level", "DEBUG", "--max-seconds", "240", quiet=False),
                          env=_env(PROLIFIC_TOKEN=em.token, PROLIFIC_BASE_URL=em.base_url),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    crowd = diligent_participants(em, port, tmp_path / "props.tsv")
    stdout, stderr = run_beside_crowd(proc, crowd, em, port)
    assert proc.returncode == 0, stderr[-3000:]
    assert "real-road: scores written to" in stdout
    if described is not None:
        assert ("POST", "/api/v1/studies/") in described.seen and ("GET", "/api/v1/filters/") in described.seen
        assert not described.violations, described.report()
    charged, subs, _ = _emulator_charges(tmp_path / "prolific.com")
    assert charged > 0 and any(s["status"] == "APPROVED" for s in subs)
    # webhooks first: the task site received Prolific's signed deliveries; the signing secret, like the
    # token, is nowhere in the output or the state directory
    db = DocStore(tmp_path / "prolific.com" / "prolific.db")
    try:
        events = Counter(e["status"] for e in db.all("hook_event"))
        secrets = [d["value"].encode() for d in db.all("hook_secret")]
    finally:
        db.close()
    assert events["SUCCEEDED"] >= len(subs) and len(secrets) == 1, (events, [line for line in stderr.splitlines() if "webhook" in line or "prolific.hooks" in line][-10:])
    token = em.token.encode()
    for secret in (token, *secrets):
        assert secret not in stdout.encode() and secret not in stderr.encode()
        for f in state.rglob("*"):
            if f.is_file():
                assert secret not in f.read_bytes(), f"the Prolific token or hook secret was written to {f}"


def test_out_of_money_on_prolific_stops_the_study_and_books_only_what_was_charged(tmp_path: Path) -> None:
    """A budget for 9 places of the 12+ the Likert stage needs: the tenth place is never opened, the HITs
    nobody can take expire, the studies are stopped (what the Likert study did not spend may open a
    few places of the ranking stage's), and the campaign ends budget_exhausted with the ledger equal to
    the emulator's charges and nothing left reserved."""
    text = EXAMPLE.read_text(encoding="utf-8").replace('budget: "60.00"', 'budget: "10.00"')
    text = text.replace("        kind: likert            #", "        kind: likert\n        lifetime: 30m           #")
    text = text.replace("propositions: ukpconvarg1-water/", f"propositions: {WATER}/").replace("truth: ukpconvarg1-water/", f"truth: {WATER}/")
    spec = tmp_path / "prolific.yaml"
    spec.write_text(text, encoding="utf-8")
    state = tmp_path / "state"
    out = run_campaign(*run_args(spec, state, "--max-seconds", "300", quiet=False), env=_env(), timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "water-prolific: budget_exhausted" in out.stdout
    charged, subs, _ = _emulator_charges(state / "prolific")
    db = DocStore(state / "prolific" / "prolific.db")
    try:
        studies = db.all("study")
    finally:
        db.close()
    store = Store.open(state)
    try:
        with store.session() as s:
            t = totals(s, "water-prolific", Decimal("10.00"))
    finally:
        store.close()
    assert t.spent == charged and t.reserved == Decimal("0.00") and t.spent <= Decimal("10.00"), (t, charged)
    assert studies and all(st["status"] != "ACTIVE" for st in studies)  # stopped: nobody can start one any more
    likert = min(studies, key=lambda st: st["date_created"])
    assert likert["total_available_places"] == 9  # 9 x 1.05 fits in 10.00, a tenth does not
