"""Time the ranking stage's batch planning at a given number of shortlisted items (issue 12: < 1 s per
batch at the last batch for 1,000 items).

Runs the ranking kind's own `plan_batch` batch after batch, answering each batch's HITs with simulated
rankings (5 workers each, the true order plus noise), and keeps the state it returns exactly as the
store would (a JSON round trip). Prints the planning time of every tenth batch and of the last one,
and what a replay of every ranking through TrueSkill (the old way) costs at the last batch.

    python benchmarks/ranking_planning.py --items 1000 [--max-batches 40]

A batch's cost is its new rankings through TrueSkill plus the pair selection over all items; neither
grows with the batches before it, so a partial run's later batches show the last batch's cost.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from campaign.tasks import get as get_kind  # noqa: E402
from campaign.tasks.base import Judgment  # noqa: E402
from campaign.tasks.kind import BatchInput  # noqa: E402
from campaign.tasks.ranking import (  # noqa: E402
    TRAP_PREFIX,
    RankingStage,  # noqa: E402
    online_model,
    orders,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--batch-pairs", type=int, default=100)
    ap.add_argument("--pair-budget", type=float, default=0.10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-batches", type=int, default=None, help="stop after this many batches (a partial run)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    items = [f"p{i:05d}" for i in range(args.items)]
    truth = {k: rng.random() for k in items}
    stage = RankingStage(name="rank", keep=min(50, args.items - 1), batch_pairs=args.batch_pairs,
                         pair_budget=args.pair_budget, shortlist=args.items)
    kind = get_kind("ranking")
    answers: list[list[Judgment]] = []
    state = None
    times: list[float] = []
    cpu: list[float] = []  # the planning call's own CPU time: on a shared machine wall time also counts waiting
    batch = 0
    while True:
        inp = BatchInput(campaign="bench", items=items, answers=list(answers), state=state, batch=batch, seed=args.seed)
        t0, c0 = time.perf_counter(), time.process_time()
        plan = kind.plan_batch(stage, inp)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        if plan.stop is not None or not plan.groups:
            break
        state = json.loads(json.dumps(plan.state))
        for group in plan.groups:
            shown = [k for k in group if not k.startswith(TRAP_PREFIX)]
            for _ in range(stage.assignments):
                order = sorted(shown, key=lambda k: -(truth[k] + rng.gauss(0, 0.15)))
                answers.append([Judgment(item_key=k, value=float(n + 1)) for n, k in enumerate(order)])
        if not args.json and batch % 10 == 0:
            print(f"batch {batch:4d}: planned in {times[-1]:.3f} s, {len(answers):,} rankings so far", flush=True)
        batch += 1
        if args.max_batches is not None and batch >= args.max_batches:
            times.append(0.0)  # no stop check in a partial run
            cpu.append(0.0)
            break
    t0 = time.perf_counter()
    online_model(items, orders(answers))
    replay = time.perf_counter() - t0
    last = -2 if len(times) > 1 else -1
    tail = sorted(times[-11:-1] if len(times) > 1 else times)  # the last ten planned batches
    out = {"items": args.items, "batches": batch, "rankings": len(answers), "last_batch_s": round(times[last], 3),
           "last_batch_cpu_s": round(cpu[last], 3), "last10_median_s": round(tail[len(tail) // 2], 3),
           "stop_check_s": round(times[-1], 3), "max_batch_s": round(max(times), 3), "replay_all_s": round(replay, 3)}
    print(json.dumps(out) if args.json else
          f"{args.items} items, {batch} batches, {len(answers):,} rankings: last batch planned in {out['last_batch_s']} s "
          f"({out['last_batch_cpu_s']} s CPU; median of the last 10 batches {out['last10_median_s']} s) "
          f"(slowest {out['max_batch_s']} s; the final stop check {out['stop_check_s']} s); "
          f"replaying every ranking would take {out['replay_all_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
