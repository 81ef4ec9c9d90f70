"""Campaign commands: run, validate, status, export, pause/resume/cancel/extend, workers, events.

Each command parses flags and calls one function that does the work; output for scripts (`--json`)
and for people share the same numbers.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from campaign.dashboard import cli as dashboard_cli
from campaign.evaluate import cli as evaluate_cli
from campaign.spec import SpecError, load_spec


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="campaign", description="Crowdsourcing campaign manager (see README.md).")
    sub = p.add_subparsers(dest="cmd", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--state", default="state", help="state directory (default: state/)")
        sp.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default: sqlite under --state)")

    r = sub.add_parser("run", help="run campaigns until they finish")
    r.add_argument("--config", default="campaigns.yaml")
    r.add_argument("--campaign", action="append", default=[], help="run only this campaign (repeatable)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--forever", action="store_true", help="keep running after every campaign has finished")
    r.add_argument("--production", action="store_true", help="allow posting to MTurk production (real money)")
    r.add_argument("--max-seconds", type=float, default=None, help=argparse.SUPPRESS)
    r.add_argument("--quiet", action="store_true")
    common(r)

    v = sub.add_parser("validate", help="check a spec; print every problem as file:line: field: message")
    v.add_argument("file", nargs="?", default="campaigns.yaml")

    st = sub.add_parser("status", help="money, progress and quality of every campaign")
    st.add_argument("--json", action="store_true")
    st.add_argument("--watch", action="store_true")
    st.add_argument("--interval", type=float, default=1.0)
    common(st)

    ex = sub.add_parser("export", help="write a campaign's scores")
    ex.add_argument("name")
    ex.add_argument("--format", choices=("csv", "jsonl"), default="csv")
    ex.add_argument("--out", default=None)
    common(ex)

    for name, helptext in (("pause", "stop posting and reviewing (collecting goes on)"),
                           ("resume", "resume a paused campaign"),
                           ("cancel", "expire outstanding HITs and release their reservations")):
        sp = sub.add_parser(name, help=helptext)
        sp.add_argument("name")
        common(sp)
    e = sub.add_parser("extend", help="extend the lifetime of a campaign's open HITs")
    e.add_argument("name")
    e.add_argument("--hours", type=float, required=True)
    e.add_argument("--config", default="campaigns.yaml")
    common(e)
    w = sub.add_parser("workers", help="workers of a campaign with the evidence behind each decision")
    w.add_argument("name")
    w.add_argument("--json", action="store_true")
    common(w)
    ev = sub.add_parser("events", help="a campaign's event log")
    ev.add_argument("name")
    ev.add_argument("--json", action="store_true")
    ev.add_argument("--limit", type=int, default=50)
    common(ev)
    rp = sub.add_parser("report", help="write an HTML report with plots")
    rp.add_argument("name")
    rp.add_argument("--out", default=None, help="default: <state>/<name>/report.html")
    common(rp)
    evaluate_cli.register(sub)
    dashboard_cli.register(sub, common)
    return p


def cmd_report(args: argparse.Namespace) -> int:
    from campaign.report import write_report
    from campaign.store import Store

    store = Store.open(args.state, args.db)
    out = Path(args.out) if args.out else Path(args.state) / args.name / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        write_report(store, args.name, out)
    except KeyError as exc:
        print(f"campaign report: {exc.args[0]}", file=sys.stderr)
        return 2
    print(f"report written to {out}")
    return 0


def _refuse(exc: SpecError) -> int:
    for line in exc.problems:
        print(line, file=sys.stderr)
    print(f"{len(exc.problems)} problem(s) found; nothing was posted.", file=sys.stderr)
    return 2


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(args.file)
    except SpecError as exc:
        return _refuse(exc)
    for c in spec.campaigns:
        stages = ", ".join(f"{s.name} ({s.kind}, {s.assignments} x ${s.reward})" for s in c.stages)
        print(f"{args.file}: campaign {c.name}: {stages}; budget ${c.budget}; marketplace {c.marketplace}; crowd {c.crowd.kind}")
    print("ok")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from campaign.daemon import RunError, RunOptions, run
    from campaign.inputs import InputError
    from campaign.progress import make_progress

    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.ERROR)  # "skipped: instance still running" is normal here
    logging.getLogger("botocore").setLevel(logging.WARNING)
    try:
        spec = load_spec(args.config)
    except SpecError as exc:
        return _refuse(exc)
    opts = RunOptions(state_dir=Path(args.state), db=args.db, seed=args.seed, forever=args.forever,
                      production=args.production, campaigns=tuple(args.campaign), max_seconds=args.max_seconds)
    progress = None if args.quiet else make_progress(sys.stdout)
    try:
        code = run(spec, opts, progress=progress)
    except (RunError, InputError) as exc:
        print(f"campaign run: {exc}", file=sys.stderr)
        return 2
    finally:
        if progress is not None:
            progress.close()
    if code == 0:
        for c in spec.campaigns:
            if not args.campaign or c.name in args.campaign:
                out = Path(args.state) / c.name / "scores.csv"
                if out.is_file():
                    print(f"{c.name}: scores written to {out} and {out.with_suffix('.jsonl')}")
    return code


def cmd_status(args: argparse.Namespace) -> int:
    return dashboard_cli.cmd_status(args)


def cmd_export(args: argparse.Namespace) -> int:
    from campaign.ops import export

    return export(args)


def cmd_ops(args: argparse.Namespace) -> int:
    from campaign import ops

    return getattr(ops, args.cmd)(args)


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    if args.cmd == "evaluate":
        return evaluate_cli.run(args)
    handlers = {"validate": cmd_validate, "run": cmd_run, "status": cmd_status, "export": cmd_export, "report": cmd_report,
                "dashboard": dashboard_cli.cmd_dashboard}
    from campaign.store import StoreError

    try:
        return handlers.get(args.cmd, cmd_ops)(args)
    except StoreError as exc:  # missing (read-only), damaged, or from a newer campaign: a message, not a traceback
        print(f"campaign {args.cmd}: {exc}", file=sys.stderr)
        return 2
