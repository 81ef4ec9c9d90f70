"""`campaign bench prolific [--config F] [--seeds 1,2,3] [--json]`: a Prolific spec run through `campaign
run` as a user runs it, once per seed, each measured from both sides.

What the researcher cares about on Prolific, which no single screen shows:

- `seconds`: the run's wall time (a child `campaign run --quiet`);
- `max_wait_hours`: the longest an open place waited for a participant, in hours of the service's
  clock (simulated hours on the virtual clock). A place opens when the study is published or its places
  are raised, and again when a submission holding one is returned, times out or is rejected; it is
  filled by the next participant to start. `unfilled_wait_hours` is the longest a place stayed open
  without anyone taking it, until the study was stopped: a place the campaign opened for nobody;
- `undecided`: submissions the campaign never decided: left awaiting review or approved by Prolific on
  its own after the auto-approval delay (Prolific charges those without anyone having looked);
- `paid_places` against `used_places`: what was paid for, in places (a reward charge is one place; the
  work pay of a returned or timed-out submission its share of one), against the approved HITs divided
  by the bundle size (the work the campaign used); the issue's bound is a ratio of at most 1.05;
- `ledger` against `charged`: the campaign's ledger (charges and bonus charges) and what the emulator
  charged for the campaign's studies, as its own code computes it from Prolific's rules;
- `audit`: the findings of `campaign.prolific.audit` (decided twice, paid twice, served twice, ledger);
- `api_calls` / `per_submission`: Prolific API calls the daemon made, where the run reports them.

The emulator's own history (`study_log`, a returned submission's `returned_at`) gives the places'
timeline; a timed-out submission freed its place at its deadline (`started_at` + the study's maximum
time).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import deque
from contextlib import closing
from decimal import Decimal
from pathlib import Path
from typing import Any

from campaign import argtypes

HOUR = 3600.0


# ------------------------------------------------------------------------------------------- place waits


def place_waits(log: list[dict[str, Any]], subs: list[dict[str, Any]], rejected_at: dict[str, float],
                max_minutes: int | None) -> tuple[list[float], list[float]]:
    """(filled, unfilled): seconds each open place waited before a participant took it, and seconds each
    place stayed open untaken until the study stopped or paused (or the last thing that happened in it).

    A pure function of the study's history. Events at one instant apply places and freed places before
    starts, so a place freed and taken at once waited 0 s. Places are taken oldest-open first, as a
    queue: the longest wait is then the longest any participant-less stretch lasted for some place."""
    events: list[tuple[float, int, str, int]] = []  # (at, order, what, value)
    for e in log:
        if e["event"] in ("publish", "places"):
            events.append((float(e["at"]), 0, "total", int(e["total"])))
        elif e["event"] in ("stop", "pause"):
            events.append((float(e["at"]), 2, "close", 0))
        elif e["event"] == "start":
            events.append((float(e["at"]), 0, "open", 0))
    for s in subs:
        events.append((float(s["started_at"]), 1, "take", 0))
        freed = None
        if s["status"] == "RETURNED":
            freed = s.get("returned_at")
        elif s["status"] == "TIMED-OUT" and max_minutes:
            freed = float(s["started_at"]) + 60.0 * max_minutes
        elif s["status"] == "REJECTED":
            freed = rejected_at.get(s["id"])
        if freed is not None:
            events.append((float(freed), 0, "free", 0))
    events.sort(key=lambda e: (e[0], e[1]))
    total = taken = 0
    is_open = False
    queue: deque[float] = deque()
    filled: list[float] = []
    unfilled: list[float] = []
    last = events[-1][0] if events else 0.0
    for at, _, what, value in events:
        if what == "total":
            total, is_open = value, True
        elif what == "open":
            is_open = True
        elif what == "close":
            unfilled.extend(at - t for t in queue)
            queue.clear()
            is_open = False
        elif what == "take":
            taken += 1
            if queue:
                filled.append(at - queue.popleft())
        elif what == "free":
            taken -= 1
        want = max(0, total - taken) if is_open else 0
        while len(queue) < want:
            queue.append(at)
        while len(queue) > want:
            queue.pop()
    unfilled.extend(last - t for t in queue)
    return filled, unfilled


# -------------------------------------------------------------------------------------------- measuring


def _rows(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return list(conn.execute(sql, args))


def _docs(db: Path, kind: str) -> list[dict[str, Any]]:
    return [json.loads(r[0]) for r in _rows(db, "SELECT body FROM docs WHERE kind=? ORDER BY seq", (kind,))]


def measure(state: Path, campaign: str, bundle: int) -> dict[str, Any]:
    """The figures of one finished run's state directory (see the module's docstring)."""
    from sqlmodel import col, select

    from campaign.prolific.audit import audit_run
    from campaign.state import CHARGES, AssignmentStatus
    from campaign.store import AssignmentRow, LedgerRow, ProlificBonusRow, ProlificStudyRow, Store

    emulator = state / "prolific" / "prolific.db"
    store = Store(f"sqlite:///{state / 'campaign.db'}")
    try:
        with store.session() as s:
            studies = {str(x) for x in s.exec(select(ProlificStudyRow.study_id).where(
                ProlificStudyRow.campaign == campaign, col(ProlificStudyRow.study_id).is_not(None))).all()}
            approved = len(s.exec(select(AssignmentRow.assignment_id).where(
                AssignmentRow.campaign == campaign, AssignmentRow.status == AssignmentStatus.APPROVED)).all())
            work_bonus = {str(sub): int(c) for sub, c, key in s.exec(select(
                ProlificBonusRow.submission_id, ProlificBonusRow.cents, ProlificBonusRow.key).where(
                ProlificBonusRow.campaign == campaign)).all() if str(key).startswith("work:")}
            ledger = sum((Decimal(a) for a in s.exec(select(LedgerRow.amount).where(
                LedgerRow.campaign == campaign, col(LedgerRow.kind).in_(CHARGES))).all()), Decimal("0.00"))
        findings = audit_run(state, campaign, store)
    finally:
        store.close()

    study_docs = {d["id"]: d for d in _docs(emulator, "study") if d["id"] in studies}
    subs = [d for d in _docs(emulator, "submission") if d.get("study_id") in studies]
    transitions = [d for d in _docs(emulator, "transition") if d.get("study_id") in studies]
    log = [d for d in _docs(emulator, "study_log") if d.get("study_id") in studies]
    rejected_at = {t["submission_id"]: float(t["at"]) for t in transitions if t["action"] == "REJECT"}
    auto_approved = {t["submission_id"] for t in transitions if t["actor"] != "researcher" and t["action"] == "APPROVE"}
    filled: list[float] = []
    unfilled: list[float] = []
    for sid, study in study_docs.items():
        f, u = place_waits([e for e in log if e["study_id"] == sid], [x for x in subs if x["study_id"] == sid],
                           rejected_at, study.get("maximum_allowed_time"))
        filled += f
        unfilled += u
    statuses: dict[str, int] = {}
    for x in subs:
        statuses[x["status"]] = statuses.get(x["status"], 0) + 1
    charged = sum(int(r) + int(f) + int(v) for st, r, f, v in _rows(emulator, "SELECT study, rewards, fees, vat FROM charges")
                  if st in studies)
    reward_charges = sum(1 for st, what in _rows(emulator, "SELECT study, what FROM charges") if st in studies and what == "reward")
    reward_of = {sid: int(d["reward"]) for sid, d in study_docs.items()}
    work_share = sum(Decimal(c) / reward_of[x["study_id"]] for x in subs for sub, c in work_bonus.items() if sub == x["id"])
    paid_places = Decimal(reward_charges) + work_share
    used_places = Decimal(approved) / bundle
    return {
        "submissions": len(subs), "statuses": statuses,
        "undecided": statuses.get("AWAITING REVIEW", 0) + statuses.get("ACTIVE", 0) + statuses.get("RESERVED", 0) + len(auto_approved),
        "auto_approved_by_prolific": len(auto_approved),
        "max_wait_hours": round(max(filled, default=0.0) / HOUR, 4),
        "unfilled_wait_hours": round(max(unfilled, default=0.0) / HOUR, 4),
        "places_opened": len(filled) + len(unfilled),
        "paid_places": str(paid_places.quantize(Decimal("0.01"))), "used_places": str(used_places.quantize(Decimal("0.01"))),
        "paid_per_used": round(float(paid_places / used_places), 3) if used_places else None,
        "ledger": str(ledger), "charged": str((Decimal(charged) / 100).quantize(Decimal("0.01"))),
        "audit": [f"{f.check}: {f.subject}: {f.detail}" for f in findings],
    }


def _api_calls(state: Path, campaign: str) -> dict[str, Any]:
    """The run's own count of Prolific API calls (`status --json`), where the daemon reports one."""
    out = subprocess.run([sys.executable, "-m", "campaign", "status", "--state", str(state), "--json"],
                         capture_output=True, text=True, timeout=120)
    try:
        rows = json.loads(out.stdout)
    except ValueError:
        return {}
    for c in rows.get("campaigns", []) if isinstance(rows, dict) else []:
        if c.get("name") == campaign and isinstance(c.get("prolific"), dict):
            return dict(c["prolific"])
    return {}


def one(config: str, seed: int, state: Path, max_seconds: float) -> dict[str, Any]:
    from campaign.spec import load_spec

    spec = load_spec(config)
    camp = next(c for c in spec.campaigns if c.prolific is not None)
    argv = [sys.executable, "-m", "campaign", "run", "--config", config, "--state", str(state), "--seed", str(seed),
            "--quiet", "--max-seconds", str(max_seconds)]
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    row: dict[str, Any] = {"seed": seed, "exit": proc.returncode, "seconds": round(seconds, 1), "load": round(load, 1)}
    if proc.returncode != 0:
        row["error"] = proc.stderr.strip()[-500:]
        return row
    assert camp.prolific is not None
    row.update(measure(state, camp.name, int(camp.prolific.bundle)))
    row.update({k: v for k, v in _api_calls(state, camp.name).items()})
    return row


def render(config: str, rows: list[dict[str, Any]]) -> None:
    print(f"campaign bench prolific: {config}")
    head = (f"{'seed':>4} {'exit':>4} {'secs':>6} {'load':>5} {'subs':>5} {'undec':>5} {'wait h':>7} {'open h':>7} "
            f"{'paid':>6} {'used':>6} {'ratio':>5} {'ledger':>8} {'charged':>8} {'calls/sub':>9} audit")
    print(head)
    for r in rows:
        if r["exit"] != 0:
            print(f"{r['seed']:>4} {r['exit']:>4} {r['seconds']:>6} {r['load']:>5}  failed: {r.get('error', '')[:200]}")
            continue
        per = r.get("per_submission")
        print(f"{r['seed']:>4} {r['exit']:>4} {r['seconds']:>6} {r['load']:>5} {r['submissions']:>5} {r['undecided']:>5} "
              f"{r['max_wait_hours']:>7} {r['unfilled_wait_hours']:>7} {r['paid_places']:>6} {r['used_places']:>6} "
              f"{r['paid_per_used']!s:>5} {r['ledger']:>8} {r['charged']:>8} {per if per is not None else '-':>9} "
              f"{len(r['audit']) or 'clean'}")
    for r in rows:
        for f in r.get("audit", []):
            print(f"  seed {r['seed']} audit: {f}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="campaign bench prolific", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="examples/prolific.yaml", help="a spec with a prolific-local campaign")
    ap.add_argument("--seeds", type=argtypes.seeds, default=[1, 2, 3], help="comma-separated seeds (default 1,2,3)")
    ap.add_argument("--max-seconds", type=float, default=600.0, help="a run not finished by then is stopped and counted as failed")
    ap.add_argument("--keep", type=Path, default=None, help="keep every run's state under this folder")
    ap.add_argument("--json", action="store_true", help="print exactly one JSON object")
    args = ap.parse_args(argv)
    seeds = list(args.seeds)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        for seed in seeds:
            rows.append(one(args.config, seed, root / f"seed-{seed}", args.max_seconds))
            if not args.json:
                print(f"seed {seed}: {rows[-1]['seconds']} s", file=sys.stderr)
    if args.json:
        print(json.dumps({"config": args.config, "runs": rows}))
    else:
        render(args.config, rows)
    return 0 if all(r["exit"] == 0 and not r.get("audit") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
