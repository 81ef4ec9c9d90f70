"""`campaign bench hostile`: a spec's campaigns (default examples/hostile.yaml) run on several seeds twice,
with the adversaries its crowds name (`crowd.adversaries`) and without them (share 0: the same crowd,
nobody misbehaving), and the quality of each stage against the simulated truth side by side.

Measures (the one `campaign bench quality` uses for each kind's scores):
- Likert: Pearson of the item scores (a later stage's `likert_score`) with the hidden truth;
- ranking: Spearman of the ranked items' scores (those with comparisons) with the hidden truth;
- nuggets: nugget F1 of the gold nuggets against the simulation's true nuggets, the sentence without its
  closing punctuation (`campaign.tasks.nuggets.true_nugget`) of every sentence whose hidden importance is
  at least 0.5; a gold nugget matches a true one in the same sentence when their tokens overlap with
  Jaccard >= 0.5. F1 of precision (gold nuggets matching) and recall (true nuggets matched).

Money: for every run, from the store, the built-in marketplace and the Prolific emulator, the payments
for work without a valid answer: a ledger charge or bonus for an assignment the store holds no valid
answer (with judgments) for; an approved marketplace assignment or a paid bonus without one; a Prolific
submission paid (reward or bonus) whose door records no assignment with a valid answer. The target is 0.
And the books (`books_check`): nothing charged twice, nothing left reserved by a finished campaign, the
ledger's charges equal to what the marketplace spent and approved and to what the Prolific emulator
charged. The target is no disagreement.

Each stage's difference (with minus without) comes with its standard error over the seeds, paired by
seed (`difference_se`; the per-seed gaps are `differences_by_seed`): a 30-item ranking's Spearman moves
by several hundredths from one seed to the next, so a mean over three seeds can miss the target by
chance, and the SE says how far to trust it.

Each run is its own `campaign run` in a child process (`--jobs` at a time), so one that stalls is cut
off at `--max-seconds` and reported as not finished, with whatever it had scored.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from campaign import argtypes
from campaign.jsonout import dumps

TARGET = 0.03  # each stage's quality, averaged over the seeds, within this of the run without adversaries


# ------------------------------------------------------------------------------------------------ measures


def _pearson(x: list[float], y: list[float]) -> float:
    from scipy.stats import pearsonr

    return float(pearsonr(x, y)[0]) if len(x) > 2 else float("nan")


def _spearman(x: list[float], y: list[float]) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(x, y)[0]) if len(x) > 2 else float("nan")


def _jaccard(a: tuple[int, int], b: tuple[int, int]) -> float:
    inter = max(0, min(a[1], b[1]) - max(a[0], b[0]) + 1)
    union = (a[1] - a[0] + 1) + (b[1] - b[0] + 1) - inter
    return inter / union if union else 0.0


def nugget_f1(gold: list[dict[str, Any]], sentences: dict[str, str], truth: dict[str, float], min_tokens: int = 3,
              important: float = 0.5, overlap: float = 0.5) -> float:
    """F1 of `gold` (rows of gold_nuggets.jsonl) against the simulation's true nuggets (module docstring)."""
    from campaign.tasks.nuggets import true_nugget

    true: dict[str, tuple[int, int]] = {}
    for key, text in sentences.items():
        if truth.get(key, 0.0) >= important:
            nug = true_nugget(text.split(), min_tokens)
            if nug is not None:
                true[key] = nug
    matched_gold = sum(1 for g in gold if g["item"] in true and _jaccard((g["first"], g["last"]), true[g["item"]]) >= overlap)
    matched_true = sum(1 for key, span in true.items()
                       if any(g["item"] == key and _jaccard((g["first"], g["last"]), span) >= overlap for g in gold))
    p = matched_gold / len(gold) if gold else 0.0
    r = matched_true / len(true) if true else 0.0
    return 2 * p * r / (p + r) if p + r else 0.0


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.is_file() else []


def quality(spec: Any, state: Path) -> dict[str, dict[str, Any]]:
    """campaign/stage -> {measure, value} for every stage of every campaign that wrote its scores."""
    from campaign.inputs import load_items, load_truth

    out: dict[str, dict[str, Any]] = {}
    for c in spec.campaigns:
        truth = load_truth(c.crowd.truth) if c.crowd.truth else {}
        rows = _jsonl(state / c.name / "scores.jsonl")
        kinds = [s.kind for s in c.stages]
        if "nuggets" in kinds:
            items = {it.key: it.text for it in load_items(c.input_kind, c.input_path)}
            stage = next(s for s in c.stages if s.kind == "nuggets")
            gold = _jsonl(state / c.name / "gold_nuggets.jsonl")
            value = nugget_f1(gold, items, truth, getattr(stage, "min_nugget_tokens", 3)) if rows else float("nan")
            out[f"{c.name}/{stage.name}"] = {"measure": "nugget F1", "value": value}
        for s in c.stages:
            if s.kind == "likert":
                key = "likert_score" if rows and "likert_score" in rows[0] else "score"
                got = [(float(r[key]), truth[r["item"]]) for r in rows if r.get(key) is not None and r["item"] in truth]
                out[f"{c.name}/{s.name}"] = {"measure": "Pearson", "value": _pearson([a for a, _ in got], [b for _, b in got])}
            elif s.kind == "ranking":
                got = [(float(r["score"]), truth[r["item"]]) for r in rows if r.get("comparisons") and r["item"] in truth]
                out[f"{c.name}/{s.name}"] = {"measure": "Spearman", "value": _spearman([a for a, _ in got], [b for _, b in got])}
    return out


# --------------------------------------------------------------------------------------------------- money


def _rows(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    if not db.is_file():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql, args).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()


def _prolific_campaigns(store: Path) -> set[str]:
    """The store's campaigns that run on Prolific (their spec has a `prolific` section)."""
    return {name for name, spec in _rows(store, "SELECT name, spec_json FROM campaigns")
            if isinstance(json.loads(spec).get("prolific"), dict)}


def _hits_of(store: Path, campaigns: set[str]) -> set[str]:
    """The marketplace HIT ids of these campaigns' HITs."""
    return {hit for hit, camp in _rows(store, "SELECT hit_id, campaign FROM hits") if camp in campaigns}


def unpaid_check(state: Path) -> dict[str, Any]:
    """Payments for work without a valid answer, from the store, the marketplace and the emulator (module
    docstring); `violations` lists them, `checked` counts what was looked at."""
    store = state / "campaign.db"
    valid = {r[0] for r in _rows(store, "SELECT a.assignment_id FROM assignments a WHERE a.valid = 1 AND EXISTS "
                                        "(SELECT 1 FROM judgments j WHERE j.assignment_id = a.assignment_id)")}
    prolific_campaigns = _prolific_campaigns(store)
    door = state / "prolific-site" / "prolific-site.sqlite"
    served: dict[str, list[str]] = {}
    for aid, sub in _rows(door, "SELECT assignment_id, submission_id FROM served"):
        served.setdefault(sub, []).append(aid)
    violations: list[str] = []
    checked = {"ledger": 0, "market": 0, "prolific": 0}
    for kind, aid, camp in _rows(store, "SELECT kind, assignment_id, campaign FROM ledger WHERE kind IN ('charge', 'bonus_charge') "
                                        "AND assignment_id IS NOT NULL"):
        checked["ledger"] += 1
        ok = aid in valid or (camp in prolific_campaigns and any(a in valid for a in served.get(aid, [])))
        if not ok:
            violations.append(f"ledger {kind} for {aid} ({camp}): no valid answer")
    prolific_hits = _hits_of(store, prolific_campaigns)
    market = state / "market" / "market.db"
    for aid, hit in _rows(market, "SELECT id, hit_id FROM assignments WHERE status = 'Approved'"):
        if hit in prolific_hits:
            continue  # paid through Prolific, checked below
        checked["market"] += 1
        if aid not in valid:
            violations.append(f"marketplace approved {aid} (HIT {hit}): no valid answer in the store")
    for (aid,) in _rows(market, "SELECT assignment_id FROM bonuses"):
        checked["market"] += 1
        if aid not in valid:
            violations.append(f"marketplace bonus on {aid}: no valid answer in the store")
    emulator = state / "prolific" / "prolific.db"
    for what, ref in _rows(emulator, "SELECT what, ref FROM charges"):
        checked["prolific"] += 1
        subs = [ref]
        if what != "reward":  # a bonus charge names its bonus (`ID:...`), whose lines name the submissions
            body = _rows(emulator, "SELECT body FROM docs WHERE kind='bonus' AND id=?", (ref.split(":", 1)[0],))
            subs = [str(line.get("submission_id")) for b in body for line in json.loads(b[0]).get("lines", [])]
        if not any(a in valid for s in subs for a in served.get(s, [])):
            violations.append(f"Prolific {what} charge {ref}: no submitted assignment with a valid answer")
    return {"violations": violations, "checked": checked}


# ------------------------------------------------------------------------------------------- adversaries


def who_misbehaved(spec: Any, seed: int, state: Path) -> dict[str, str]:
    """Marketplace worker id -> behaviour of every adversary of the run, rebuilt as `campaign run` built its
    crowds: a lone local crowd's pool is seeded with the run's seed, several with the seed and the
    campaign's name; a Prolific crowd with the run's seed, its workers known on the task site by their
    emulator participant (external id `sim:CAMPAIGN:WORKER`)."""
    from campaign.crowd.adversaries import assign
    from campaign.crowd.models import make_pool
    from campaign.prolific.gate import site_worker_id
    from campaign.rng import stable_seed

    local = [c for c in spec.campaigns if c.crowd.kind == "simulated" and c.marketplace == "local"]
    participants = {str(json.loads(b)["external_id"]): pid for pid, b in
                    _rows(state / "prolific" / "prolific.db", "SELECT id, body FROM docs WHERE kind='participant'")
                    if json.loads(b).get("external_id")}
    out: dict[str, str] = {}
    for c in spec.campaigns:
        if c.crowd.kind != "simulated":
            continue
        if c in local:
            pool_seed = seed if len(local) == 1 else stable_seed(seed, c.name) % 2**31
            pool = make_pool(c.crowd.workers, pool_seed, dict(c.crowd.mix), arrival_span=c.crowd.arrival_span)
            out.update(assign(pool, c.crowd.adversaries, pool_seed))
        else:
            pool = make_pool(c.crowd.workers, seed, dict(c.crowd.mix), arrival_span=c.crowd.arrival_span)
            for wid, b in assign(pool, c.crowd.adversaries, seed).items():
                pid = participants.get(f"sim:{c.name}:{wid}")
                if pid is not None:
                    out[site_worker_id(pid)] = b
    return out


def adversary_outcomes(spec: Any, seed: int, state: Path) -> dict[str, dict[str, Any]]:
    """Per behaviour: what its workers' assignments became in the marketplace and the store, what the
    ledger charged for them, and how many of their judgments reached the scores (not excluded)."""
    who = who_misbehaved(spec, seed, state)
    out: dict[str, dict[str, Any]] = {b: {"workers": 0, "market": {}, "collected": 0, "valid": 0, "approved": 0,
                                          "judgments_scored": 0, "charged": "0.00"} for b in sorted(set(who.values()))}
    for b in who.values():
        out[b]["workers"] += 1
    for wid, status in _rows(state / "market" / "market.db", "SELECT worker_id, status FROM assignments"):
        if wid in who:
            m = out[who[wid]]["market"]
            m[status] = m.get(status, 0) + 1
    store = state / "campaign.db"
    for wid, status, valid in _rows(store, "SELECT worker_id, status, valid FROM assignments"):
        if wid in who:
            o = out[who[wid]]
            o["collected"] += 1
            o["valid"] += int(bool(valid))
            o["approved"] += int(status == "approved")
    for wid, n in _rows(store, "SELECT worker_id, COUNT(*) FROM judgments WHERE excluded = 0 AND item_key NOT LIKE 'trap:%' "
                               "GROUP BY worker_id"):
        if wid in who:
            out[who[wid]]["judgments_scored"] += int(n)
    from decimal import Decimal

    charged: dict[str, Decimal] = {}
    for wid, amount in _rows(store, "SELECT a.worker_id, l.amount FROM ledger l JOIN assignments a ON a.assignment_id = l.assignment_id "
                                    "WHERE l.kind IN ('charge', 'bonus_charge')"):
        if wid in who:
            charged[who[wid]] = charged.get(who[wid], Decimal("0")) + Decimal(amount)
    for b, amount in charged.items():
        out[b]["charged"] = str(amount)
    return out


def books_check(state: Path) -> list[str]:
    """Where the books disagree (empty: they agree): an assignment charged twice; money still reserved by
    a finished campaign; the built-in marketplace's spending (its own HITs for Prolific places aside, which
    Prolific pays) against the ledger's charges and bonuses of the campaigns posted there, and the set of
    assignments it approved against those the ledger charged; what the Prolific emulator charged against
    the ledger's Prolific charges, and a charge it made twice. Amounts are the ledger's `amount` (reward and
    fee together), summed as Decimal. Meant for a state folder whose marketplace and emulator served its
    campaigns alone, as a bench run's do."""
    from collections import Counter
    from decimal import Decimal

    store = state / "campaign.db"
    out: list[str] = []
    status_of = dict(_rows(store, "SELECT name, status FROM campaigns"))
    ledger = _rows(store, "SELECT campaign, kind, amount, assignment_id FROM ledger")
    charged = Counter((c, a) for c, k, _, a in ledger if k == "charge")
    out += [f"{c}: assignment {a} charged {n} times" for (c, a), n in sorted(charged.items()) if n > 1]
    sign = {"reserve": 1, "bonus_reserve": 1, "charge": -1, "bonus_charge": -1, "release": -1, "bonus_release": -1}
    for name, status in sorted(status_of.items()):
        left = sum((Decimal(a) * sign.get(k, 0) for c, k, a, _ in ledger if c == name), Decimal(0))
        if status == "finished" and left != 0:
            out.append(f"{name}: finished with {left} still reserved")
    paid = {c: sum((Decimal(a) for cc, k, a, _ in ledger if cc == c and k in ("charge", "bonus_charge")), Decimal(0))
            for c in status_of}
    prolific = _prolific_campaigns(store)
    market = state / "market" / "market.db"
    if market.is_file():
        places = _hits_of(store, prolific)
        approved = _rows(market, "SELECT a.id, a.hit_id, h.unit_cost_cents FROM assignments a JOIN hits h ON h.id = a.hit_id "
                                 "WHERE a.status = 'Approved'")
        spent = sum(int(r[0]) for r in _rows(market, "SELECT spent_cents FROM accounts"))
        spent -= sum(int(cost) for _, hit, cost in approved if hit in places)
        booked = sum((v for c, v in paid.items() if c not in prolific), Decimal(0))
        if Decimal(spent) / 100 != booked:
            out.append(f"the marketplace spent {Decimal(spent) / 100} but the ledger charged {booked}")
        theirs = {a for a, hit, _ in approved if hit not in places}
        ours = {a for (c, a), _ in charged.items() if c not in prolific}
        if theirs != ours:
            out.append(f"{len(theirs - ours)} approved on the marketplace and not charged in the ledger, "
                       f"{len(ours - theirs)} charged and not approved")
    emulator = state / "prolific" / "prolific.db"
    if emulator.is_file():
        rows = _rows(emulator, "SELECT what, ref, rewards + fees + vat FROM charges")
        out += [f"Prolific charged {what} {ref} {n} times" for (what, ref), n in Counter((w, r) for w, r, _ in rows).items() if n > 1]
        total = Decimal(sum(int(x) for *_, x in rows)) / 100
        booked = sum((v for c, v in paid.items() if c in prolific), Decimal(0))
        if total != booked:
            out.append(f"Prolific charged {total} but the ledger charged {booked}")
    return out


# ------------------------------------------------------------------------------------------------- running


def one(config: str, seed: int, clean: bool, state: Path, max_seconds: float, share: float | None = None,
        behaviours: dict[str, float] | None = None, only: tuple[str, ...] = ()) -> dict[str, Any]:
    """One run in this process: the spec (without its adversaries if `clean`; with `share` of them, of
    `behaviours`, if given), then its measures."""
    import logging

    from campaign.daemon import RunOptions, run
    from campaign.spec import Spec, load_spec, with_adversaries

    logging.getLogger("apscheduler").setLevel(logging.ERROR)
    spec = load_spec(config)
    if only:
        spec = Spec(path=spec.path, campaigns=tuple(c for c in spec.campaigns if c.name in only))
    if clean:
        spec = with_adversaries(spec, 0.0)
    elif share is not None or behaviours:
        spec = with_adversaries(spec, share if share is not None else 0.25, behaviours)
    t0 = time.monotonic()
    code = run(spec, RunOptions(state_dir=state, seed=seed, max_seconds=max_seconds))
    seconds = time.monotonic() - t0
    return {"seed": seed, "adversaries": not clean, "exit": code, "finished": code == 0, "seconds": round(seconds, 1),
            "quality": quality(spec, state), "money": {**unpaid_check(state), "books": books_check(state)},
            "events": _event_counts(state),
            "adversary_outcomes": adversary_outcomes(spec, seed, state) if not clean else {}}


def _event_counts(state: Path) -> dict[str, int]:
    return {str(k): int(n) for k, n in _rows(state / "campaign.db", "SELECT kind, COUNT(*) FROM events WHERE level != 'info' "
                                                                     "GROUP BY kind")}


def _spawn(config: str, seed: int, clean: bool, state: Path, max_seconds: float, extra: list[str]) -> subprocess.Popen:
    argv = [sys.executable, "-m", "campaign.bench.hostile", "--one", "--config", config, "--seeds", str(seed),
            "--state", str(state), "--max-seconds", str(max_seconds)] + (["--clean"] if clean else []) + extra
    env = {k: v for k, v in os.environ.items() if k != "CAMPAIGN_ADVERSARIES"}
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)


def runs(config: str, seeds: list[int], jobs: int, max_seconds: float, keep: Path | None,
         extra: list[str]) -> Iterator[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = keep or Path(tmp)
        todo = [(seed, clean) for seed in seeds for clean in (False, True)]
        running: list[tuple[subprocess.Popen, int, bool]] = []
        while todo or running:
            while todo and len(running) < jobs:
                seed, clean = todo.pop(0)
                state = root / f"{'clean' if clean else 'hostile'}-{seed}"
                running.append((_spawn(config, seed, clean, state, max_seconds, extra), seed, clean))
            proc, seed, clean = running.pop(0)
            out, _ = proc.communicate()
            last = out.strip().splitlines()[-1] if out.strip() else ""
            try:
                yield json.loads(last)
            except ValueError:
                yield {"seed": seed, "adversaries": not clean, "exit": proc.returncode, "finished": False, "seconds": 0,
                       "quality": {}, "money": {"violations": ["the run crashed"], "checked": {}, "books": ["the run crashed"]},
                       "events": {}}


def table(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per stage: the measure averaged over the seeds with and without adversaries, the difference, and
    the standard error of that difference over the seeds that have both runs (paired by seed: the two runs
    of a seed share their crowd and items, so the per-seed gap is far less noisy than either mean)."""
    stages: dict[str, dict[str, Any]] = {}
    by_seed: dict[str, dict[int, dict[bool, float]]] = {}
    for r in results:
        for name, q in r["quality"].items():
            row = stages.setdefault(name, {"measure": q["measure"], "hostile": [], "clean": []})
            row["hostile" if r["adversaries"] else "clean"].append(q["value"])
            by_seed.setdefault(name, {}).setdefault(r["seed"], {})[r["adversaries"]] = q["value"]
    for name, row in stages.items():
        for k in ("hostile", "clean"):
            vals = [v for v in row[k] if v == v]
            row[k + "_mean"] = round(statistics.mean(vals), 4) if vals else None
        h, c = row["hostile_mean"], row["clean_mean"]
        row["difference"] = round(h - c, 4) if h is not None and c is not None else None
        row["within_target"] = row["difference"] is not None and row["difference"] >= -TARGET
        gaps = {seed: v[True] - v[False] for seed, v in sorted(by_seed[name].items())
                if True in v and False in v and v[True] == v[True] and v[False] == v[False]}
        row["differences_by_seed"] = {str(seed): round(g, 4) for seed, g in gaps.items()}
        row["difference_se"] = (round(statistics.stdev(gaps.values()) / math.sqrt(len(gaps)), 4)
                                if len(gaps) > 1 else None)
    return stages


def outcomes(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`adversary_outcomes` of every run summed per behaviour."""
    from decimal import Decimal

    out: dict[str, dict[str, Any]] = {}
    for r in results:
        for b, o in r.get("adversary_outcomes", {}).items():
            t = out.setdefault(b, {"workers": 0, "market": {}, "collected": 0, "valid": 0, "approved": 0,
                                   "judgments_scored": 0, "charged": "0.00"})
            for k in ("workers", "collected", "valid", "approved", "judgments_scored"):
                t[k] += o[k]
            for k, v in o["market"].items():
                t["market"][k] = t["market"].get(k, 0) + v
            t["charged"] = str(Decimal(t["charged"]) + Decimal(o["charged"]))
    return dict(sorted(out.items()))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="campaign bench hostile", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="examples/hostile.yaml", help="the spec whose campaigns run with and without adversaries")
    ap.add_argument("--seeds", type=argtypes.seeds, default=[1, 2, 3], help="comma-separated seeds (default 1,2,3)")
    ap.add_argument("--jobs", type=argtypes.positive, default=2, help="runs at a time (default 2)")
    ap.add_argument("--max-seconds", type=float, default=900.0, help="a run not finished by then counts as stalled")
    ap.add_argument("--keep", type=Path, default=None, help="keep every run's state under this folder")
    ap.add_argument("--share", type=float, default=None, help="instead of the spec's: this share of every crowd adversarial")
    ap.add_argument("--behaviours", default=None, metavar="NAME[,NAME...]",
                    help="instead of the spec's: only these behaviours, alike (e.g. hold,fast)")
    ap.add_argument("--campaign", action="append", default=[], metavar="NAME", help="only this campaign (repeatable)")
    ap.add_argument("--json", action="store_true", help="print exactly one JSON object")
    ap.add_argument("--report", type=Path, default=None, metavar="FILE", help="print the report of a saved --json output")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--clean", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--state", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    seeds = list(args.seeds)
    behaviours = {b.strip(): 1.0 for b in args.behaviours.split(",") if b.strip()} if args.behaviours else None
    extra = (["--share", str(args.share)] if args.share is not None else []) + (
        ["--behaviours", args.behaviours] if args.behaviours else []) + [x for n in args.campaign for x in ("--campaign", n)]
    if args.report is not None:
        saved = json.loads(args.report.read_text(encoding="utf-8"))
        render(args.config, saved["runs"], table(saved["runs"]), saved["summary"])  # figures added since, too
        return 0
    if args.one:
        assert args.state is not None
        print(dumps(one(args.config, seeds[0], args.clean, args.state, args.max_seconds, args.share, behaviours,
                             tuple(args.campaign))))
        return 0
    t0 = time.monotonic()
    results = []
    for r in runs(args.config, seeds, max(1, args.jobs), args.max_seconds, args.keep, extra):
        results.append(r)
        if not args.json:
            print(f"seed {r['seed']} {'with' if r['adversaries'] else 'without'} adversaries: "
                  f"{'finished' if r['finished'] else 'NOT finished (exit ' + str(r['exit']) + ')'} in {r['seconds']} s; "
                  f"payments without a valid answer: {len(r['money']['violations'])}; "
                  f"books disagreeing: {len(r['money']['books'])}", file=sys.stderr, flush=True)
    stages = table(results)
    unpaid = sum(len(r["money"]["violations"]) for r in results)
    books = sum(len(r["money"].get("books", [])) for r in results)
    summary = {"all_finished": all(r["finished"] for r in results), "payments_without_valid_answer": unpaid,
               "books_disagreements": books,
               "every_stage_within_target": all(s["within_target"] for s in stages.values()) and bool(stages),
               "target": f"every run finishes; each stage's mean quality with adversaries >= without - {TARGET}; "
                         "no payment without a valid answer; the ledger agrees with the marketplace and Prolific",
               "seeds": seeds,
               "seconds": round(time.monotonic() - t0, 1)}
    summary["met"] = summary["all_finished"] and unpaid == 0 and books == 0 and summary["every_stage_within_target"]
    if args.json:
        print(dumps({"stages": stages, "adversaries": outcomes(results), "runs": results, "summary": summary}))
        return 0
    render(args.config, results, stages, summary)
    return 0


def render(config: str, results: list[dict[str, Any]], stages: dict[str, Any], summary: dict[str, Any]) -> None:
    """The text report (`--report FILE` prints it again from a saved `--json`)."""
    seeds = summary["seeds"]
    unpaid = summary["payments_without_valid_answer"]
    print(f"{config}, seeds {','.join(map(str, seeds))}: quality against the simulated truth, mean over the seeds")
    for r in results:
        print(f"  seed {r['seed']} {'with' if r['adversaries'] else 'without'} adversaries: "
              f"{'finished' if r['finished'] else 'NOT finished (exit ' + str(r['exit']) + ')'} in {r['seconds']} s; "
              f"payments without a valid answer: {len(r['money']['violations'])}"
              + (f"; books disagreeing: {len(r['money']['books'])}" if "books" in r["money"] else ""))
    print(f"{'campaign/stage':<26} {'measure':<10} {'without':>8} {'with':>8} {'diff':>8} {'(SE)':>7}  per seed (with / without)")
    for name, s in stages.items():
        fmt = lambda v: "    n/a" if v is None else f"{v:8.3f}"  # noqa: E731
        per = " ".join(f"{h:.3f}/{c:.3f}" for h, c in zip(s["hostile"], s["clean"]))
        se = s["difference_se"]
        print(f"{name:<26} {s['measure']:<10} {fmt(s['clean_mean'])} {fmt(s['hostile_mean'])} {fmt(s['difference'])} "
              f"{'' if se is None else f'({se:.3f})':>7}  {per}")
    print("what the adversaries' work became, summed over the seeds (marketplace statuses; collected, valid and "
          "approved in the store; judgments in the scores; charged by the ledger, MTurk-style work only)")
    for b, o in outcomes(results).items():
        market = ", ".join(f"{k} {v}" for k, v in sorted(o["market"].items()))
        print(f"  {b:<14} {o['workers']:>2} workers: {market or 'nothing'}; collected {o['collected']}, valid {o['valid']}, "
              f"approved {o['approved']}; {o['judgments_scored']} judgments scored; charged {o['charged']}")
    for r in results:
        for v in [*r["money"]["violations"][:5], *r["money"].get("books", [])[:5]]:
            print(f"  seed {r['seed']} {'with' if r['adversaries'] else 'without'}: {v}")
    books = f"; books disagreeing: {summary['books_disagreements']}" if "books_disagreements" in summary else ""
    print(f"all runs finished: {summary['all_finished']}; payments without a valid answer: {unpaid}{books}; "
          f"every stage within {TARGET}: {summary['every_stage_within_target']}; target met: {summary['met']} "
          f"({summary['seconds']} s)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
