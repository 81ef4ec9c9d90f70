"""A hostile crowd and a daemon SIGKILLed at arbitrary instants, together, then left to finish; what the
books say afterwards.

Each seed: `campaign run --config SPEC --seed S` started and SIGKILLed `--kills` times, each after a
seeded random delay between `--min` and `--max` seconds, then run to its end (cut off at `--max-seconds`).
Printed per seed: how long the last run took to finish, the payments for work without a valid answer
and the disagreements of the books (`campaign bench hostile`'s `unpaid_check` and `books_check`), and how
many webhook subscriptions the Prolific emulator holds (one: the last start's).

    python benchmarks/hostile_kills.py --seeds 1,2,3 --kills 10
    python benchmarks/hostile_kills.py --seeds 3 --kills 25 --min 0.3 --max 3 --keep /tmp/kills
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from campaign.bench.hostile import books_check, unpaid_check  # noqa: E402


def _subscriptions(state: Path) -> int | None:
    db = state / "prolific" / "prolific.db"
    if not db.is_file():
        return None
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT COUNT(*) FROM docs WHERE kind = 'hook_subscription'").fetchone()[0])
    finally:
        con.close()


def one(spec: str, seed: int, kills: int, low: float, high: float, max_seconds: float, state: Path) -> dict:
    args = [sys.executable, "-m", "campaign", "run", "--config", spec, "--state", str(state), "--seed", str(seed), "--quiet"]
    delays = random.Random(seed).sample(range(10**6), kills)
    for k in range(kills):
        p = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(low + (high - low) * delays[k] / 10**6)
        p.send_signal(signal.SIGKILL)
        p.wait()
    t0 = time.monotonic()
    try:
        code = subprocess.run(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=max_seconds).returncode
    except subprocess.TimeoutExpired:
        code = None
    return {"seed": seed, "kills": kills, "finished": code == 0, "last_run_seconds": round(time.monotonic() - t0, 1),
            "payments_without_valid_answer": unpaid_check(state)["violations"], "books": books_check(state),
            "webhook_subscriptions": _subscriptions(state)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="examples/hostile.yaml", help="the spec (default: examples/hostile.yaml)")
    ap.add_argument("--seeds", default="1,2,3", help="comma-separated seeds (default 1,2,3)")
    ap.add_argument("--kills", type=int, default=10, help="SIGKILLs before the run that finishes (default 10)")
    ap.add_argument("--min", type=float, default=1.0, help="shortest delay before a kill, seconds (default 1)")
    ap.add_argument("--max", type=float, default=7.0, help="longest delay before a kill, seconds (default 7)")
    ap.add_argument("--max-seconds", type=float, default=900.0, help="the last run is cut off after this long")
    ap.add_argument("--keep", type=Path, default=None, help="keep each seed's state folder under this folder")
    args = ap.parse_args(argv)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        for seed in [int(s) for s in args.seeds.split(",") if s.strip()]:
            r = one(args.config, seed, args.kills, args.min, args.max, args.max_seconds, root / f"seed-{seed}")
            print(json.dumps(r), flush=True)
            ok = ok and r["finished"] and not r["payments_without_valid_answer"] and not r["books"] \
                and r["webhook_subscriptions"] in (None, 1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
