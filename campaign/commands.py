"""The `campaign` parser tree and the campaign commands: run, validate, status, export, report,
pause/resume/cancel/extend, workers, events.

Commands come from the modules in `COMMAND_MODULES`; each has `register(sub)`, so a new command is one
module and one line here. Each command parses flags and calls one function that does the work; output
for scripts (`--json`) and for people share the same numbers. Every parser in the tree shows option
defaults in its help (`CampaignParser`), including those other modules add.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from campaign import argtypes
from campaign.money import shown
from campaign.spec import SpecError, load_spec
from campaign.state import CampaignStatus


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows each option's default after its help, except where a default says nothing (flags, None) or
    the help text already names it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        silent = action.default is None or action.default is False or action.default == [] or action.default == argparse.SUPPRESS
        if ("default" in text or silent or action.const is not None
                or not action.option_strings and action.nargs not in (argparse.OPTIONAL, argparse.ZERO_OR_MORE)):
            return text
        return f"{text} (default: %(default)s)"


class CampaignParser(argparse.ArgumentParser):
    """An ArgumentParser whose help shows defaults; every subparser of the tree is one of these."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


#: Modules that add commands, in the order `campaign --help` lists them. Each has `register(sub)` (or
#: `register(sub, common)`, `common` adding --state and --db to a parser), which adds its parsers to the
#: `sub` subparsers action. A command runs the `func` its parser sets, else the module's `cmd_<name>(args)`,
#: else the module's `run(args)`; each returns the exit code. Imports inside `register` should stay light.
COMMAND_MODULES: tuple[str, ...] = (
    "campaign.commands",
    "campaign.init",
    "campaign.dashboard.cli",
    "campaign.evaluate.cli",
    "campaign.aggregate.cli",
    "campaign.tools_cli",
    "campaign.crowd.cli",
    "campaign.ops",
    "campaign.answers.cli",
    "campaign.held_cli",
    "campaign.preview",
    "campaign.simulate_cli",
)


def build_parser() -> CampaignParser:
    from campaign import __version__

    p = CampaignParser(prog="campaign", description="Crowdsourcing campaign manager: turns YAML campaign specs into "
                       "annotation HITs, posts them, checks and pays for the answers, and writes scores (see README.md).",
                       epilog="Run `campaign COMMAND --help` for a command's options.")
    p.add_argument("--version", action="version", version=f"campaign {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND", title="commands", parser_class=CampaignParser)
    for name in COMMAND_MODULES:
        module = importlib.import_module(name)
        before = set(sub.choices)
        if len(inspect.signature(module.register).parameters) > 1:
            module.register(sub, _common)
        else:
            module.register(sub)
        for added in set(sub.choices) - before:
            parser = sub.choices[added]
            func = getattr(module, f"cmd_{added.replace('-', '_')}", None) or getattr(module, "run", None)
            if parser.get_default("func") is None and func is not None:
                parser.set_defaults(func=func)
    return p


def _common(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--state", default="state", help="state directory")
    sp.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default: sqlite under --state)")


def _name(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("name", help="the campaign's name, as in its spec")


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("run", help="run campaigns until they finish; resumes whatever the store holds")
    r.add_argument("--config", default="campaigns.yaml", help="the spec file")
    r.add_argument("--campaign", action="append", default=[], metavar="NAME", help="run only this campaign (repeatable)")
    r.add_argument("--seed", type=argtypes.seed, default=0, help="seed of every random choice (plans, simulated crowd)")
    r.add_argument("--forever", action="store_true", help="keep running after every campaign has finished")
    r.add_argument("--live", action="store_true",
                   help="pace a simulated crowd at the spec's `speed` (simulated seconds per real second), to watch it "
                        "in `campaign dashboard`; without it a simulation runs on virtual time, as fast as the CPU allows")
    r.add_argument("--production", action="store_true", help="allow posting to MTurk production (real money)")
    r.add_argument("--max-seconds", type=float, default=None, help=argparse.SUPPRESS)
    r.add_argument("--market-port", type=argtypes.port, default=0, metavar="PORT",
                   help="port of the built-in marketplace and its worker site on 127.0.0.1 (0: the port of the "
                        "state folder's last run if it is free, else any free port)")
    r.add_argument("--quiet", action="store_true", help="no progress view; warnings and errors only")
    r.add_argument("--log-level", type=str.upper, choices=("DEBUG", "INFO", "WARNING", "ERROR"), default=None,
                   help="level of every campaign logger; the store's events are logged at their own level")
    r.add_argument("--lease-ttl", type=float, default=15.0, metavar="S",
                   help="with a shared (PostgreSQL) --db: seconds after which a campaign whose daemon stopped "
                        "renewing its lease is taken over by another daemon")
    _common(r)
    r.set_defaults(func=cmd_run)

    v = sub.add_parser("validate", help="check a spec; print every problem as file:line: field: message")
    v.add_argument("file", nargs="?", default=None, help="the spec file (default: campaigns.yaml in this folder)")
    v.add_argument("--config", default=None, metavar="FILE", help="the spec file, as `run --config` takes it (same as FILE)")
    v.set_defaults(func=cmd_validate)

    st = sub.add_parser("status", help="money, progress, quality and recent events of every campaign")
    st.add_argument("--json", action="store_true", help="print the figures as JSON")
    st.add_argument("--watch", action="store_true", help="open the live dashboard (campaign dashboard)")
    st.add_argument("--interval", type=float, default=1.0, help="seconds between redraws with --watch")
    _common(st)
    st.set_defaults(func=cmd_status)

    ex = sub.add_parser("export", help="write a campaign's scores (the final export once finished, scores so far before), or with --answers every answer")
    _name(ex)
    ex.add_argument("--out", default=None, help="output file (default: standard output)")
    _common(ex)
    from campaign.answers.cli import add_export_options

    add_export_options(ex)  # --format, --answers, --raw-ids: scores or every answer

    rp = sub.add_parser("report", help="write an HTML report: results, agreement, quality control, spend")
    _name(rp)
    rp.add_argument("--out", default=None, help="output file (default: <state>/<name>/report.html)")
    _common(rp)
    rp.set_defaults(func=cmd_report)

    for name, helptext in (("pause", "stop posting and reviewing (collecting goes on)"),
                           ("resume", "resume a paused campaign"),
                           ("cancel", "expire outstanding HITs and release their reservations")):
        sp = sub.add_parser(name, help=helptext)
        _name(sp)
        _common(sp)
        sp.set_defaults(func=cmd_ops)
    e = sub.add_parser("extend", help="push back the expiry of a campaign's open HITs")
    _name(e)
    e.add_argument("--hours", type=float, required=True, help="hours to add to every open HIT's lifetime")
    _common(e)
    e.set_defaults(func=cmd_ops)
    w = sub.add_parser("workers", help="workers of a campaign with the evidence behind each decision")
    _name(w)
    w.add_argument("--json", action="store_true", help="print the workers as JSON")
    _common(w)
    w.set_defaults(func=cmd_ops)
    ev = sub.add_parser("events", help="a campaign's event log")
    _name(ev)
    ev.add_argument("--json", action="store_true", help="print the events as JSON")
    ev.add_argument("--limit", type=argtypes.positive, default=50, help="show the last N events")
    ev.add_argument("--level", choices=("info", "warning", "error"), default="info",
                    help="only events of this level or worse (warning: warnings and errors)")
    ev.add_argument("--kind", action="append", default=[], metavar="KIND",
                    help="only events of this kind, e.g. worker_excluded (repeatable)")
    _common(ev)
    ev.set_defaults(func=cmd_ops)


def cmd_report(args: argparse.Namespace) -> int:
    from campaign.ops import missing, open_existing
    from campaign.report import write_report

    store = open_existing(args)
    if store is None or missing(store, args.name):
        return 2
    from campaign.outfile import OutputError

    out = Path(args.out) if args.out else Path(args.state) / args.name / "report.html"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_report(store, args.name, out, export_dir=Path(args.state) / args.name)
    except OutputError as exc:
        print(f"campaign report: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the folder could not be made
        print(f"campaign report: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"report written to {out}")
    return 0


def _refuse(exc: SpecError) -> int:
    for line in exc.problems:
        print(line, file=sys.stderr)
    print(f"{len(exc.problems)} problem(s) found; nothing was posted.", file=sys.stderr)
    return 2


def cmd_validate(args: argparse.Namespace) -> int:
    if args.config is not None:
        if args.file is not None and args.file != args.config:
            print(f"campaign validate: two spec files given ({args.file} and --config {args.config}); give one",
                  file=sys.stderr)
            return 2
        args.file = args.config
    if args.file is None:
        if not Path("campaigns.yaml").is_file():
            print(f"campaign validate: no campaigns.yaml in {Path.cwd()}; name the spec to check: "
                  "campaign validate FILE", file=sys.stderr)
            return 2
        args.file = "campaigns.yaml"
    try:
        spec = load_spec(args.file)
    except SpecError as exc:
        return _refuse(exc)
    for line in spec.warnings:
        print(f"warning: {line}", file=sys.stderr)
    problems: list[str] = []
    for c in spec.campaigns:
        stages = ", ".join(f"{s.name} ({s.kind}, {s.assignments} x ${s.reward})" for s in c.stages)
        if c.prolific is not None:  # paid per submission on Prolific, not per HIT
            from campaign.prolific.account import percent
            from campaign.prolific.study import place_cost, reward_per_submission

            p = c.prolific
            stages = (", ".join(f"{s.name} ({s.kind}, {s.assignments} judgments per HIT)" for s in c.stages)
                      + f"; {shown(reward_per_submission(p), p.currency)} per submission of {p.bundle} HITs, "
                      f"{shown(place_cost(p), p.currency)} a place with fee and VAT (assumed: fee {percent(p.fee_rate)}%, "
                      f"VAT {percent(p.vat_rate)}% on it; a run reads and uses the account's)")
        print(f"{args.file}: campaign {c.name}: {stages}; budget {shown(c.budget, c.currency)}; marketplace {c.marketplace}; "
              f"crowd {c.crowd.kind}")
        for line in _estimate_lines(c, problems=problems):
            print(line)
    if problems:
        return _refuse(SpecError([f"{args.file}: {p}" for p in problems]))
    print("ok")
    return 0


#: libraries whose INFO lines say nothing a user acts on (Alembic's "Context impl SQLiteImpl", "Running
#: upgrade ..."): shown only with `--log-level debug`
QUIET_LIBRARIES = ("alembic", "apscheduler", "botocore", "boto3", "urllib3", "sqlalchemy")


def configure_logging(level: str | None, quiet: bool = False) -> None:
    """`campaign run`'s logging: the campaign's own loggers at `level` (default INFO, WARNING when quiet);
    libraries at WARNING (APScheduler at ERROR: "skipped: instance still running" is normal here) unless
    the level is DEBUG."""
    logging.basicConfig(level=level or (logging.WARNING if quiet else logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if level is None:  # events go to the log below warning only when asked for
        logging.getLogger("campaign.events").setLevel(logging.WARNING)
    if level != "DEBUG":
        for name in QUIET_LIBRARIES:
            logging.getLogger(name).setLevel(logging.ERROR if name == "apscheduler" else logging.WARNING)


def _estimate_lines(c: Any, seed: int = 0, problems: list[str] | None = None) -> list[str]:
    """The campaign's cost estimate as lines (`campaign.estimate`); a problem reading its items is the
    run's to report, so here it is one line. HIT pages too large for the marketplace (`campaign.page_size`)
    are added to `problems`."""
    from campaign.estimate import describe, estimate_campaign, plan_items
    from campaign.inputs import InputError
    from campaign.page_size import oversized

    try:
        items = plan_items(c)
        if problems is not None:
            problems.extend(oversized(c, items, seed))
        return describe(estimate_campaign(c, items, seed))
    except (InputError, OSError, ValueError) as exc:
        return [f"cost estimate for {c.name}: not available ({exc})"]


def _state_problem(state: Path) -> str | None:
    """Why the state folder can be neither used nor made, or None; creates nothing. The nearest part of
    the path that exists must be a folder this user may write into (or the state folder itself)."""
    import os

    here = state
    while not here.exists():
        if here.parent == here:
            return None
        here = here.parent
    if not here.is_dir():
        return f"{here} is a file, not a folder"
    if not os.access(here, os.W_OK | os.X_OK):
        return f"{here} is not writable by this user"
    return None


def cmd_run(args: argparse.Namespace) -> int:
    from campaign.daemon import RunError, RunOptions, run
    from campaign.inputs import InputError
    from campaign.progress import make_progress

    configure_logging(args.log_level, args.quiet)
    try:
        spec = load_spec(args.config)
    except SpecError as exc:
        return _refuse(exc)
    unknown = [n for n in args.campaign if n not in {c.name for c in spec.campaigns}]
    if unknown:  # said before the state directory is created or locked, so a typo leaves nothing behind
        print(f"campaign run: no campaign named {', '.join(unknown)} in {args.config} (it has: "
              f"{', '.join(c.name for c in spec.campaigns)})", file=sys.stderr)
        return 2
    unusable = None if args.db else _state_problem(Path(args.state))
    if unusable:  # said before the estimate, so the last line a user reads is the one that matters
        print(f"campaign run: --state {args.state}: {unusable}", file=sys.stderr)
        return 2
    for line in spec.warnings:
        print(f"warning: {line}", file=sys.stderr)
    problems: list[str] = []
    for c in spec.campaigns:  # what the run will cost, before anything is posted
        if not args.campaign or c.name in args.campaign:
            for line in _estimate_lines(c, args.seed, problems):
                if line.lstrip().startswith("warning:"):
                    logging.getLogger("campaign.estimate").warning("%s: %s", c.name, line.strip())
                elif not args.quiet:
                    print(line, flush=True)
    if problems:  # a HIT the marketplace would refuse: said before the state folder is made
        return _refuse(SpecError([f"{args.config}: {p}" for p in problems]))
    opts = RunOptions(state_dir=Path(args.state), db=args.db, seed=args.seed, forever=args.forever,
                      production=args.production, campaigns=tuple(args.campaign), max_seconds=args.max_seconds,
                      lease_ttl=args.lease_ttl, market_port=args.market_port, live=args.live,
                      say=lambda line: print(line, flush=True))
    progress = None if args.quiet else make_progress(sys.stdout)
    try:
        code = run(spec, opts, progress=progress)
    except (RunError, InputError) as exc:
        print(f"campaign run: {exc}", file=sys.stderr)
        return 2
    finally:
        if progress is not None:
            progress.close()
    if code == 130:  # Ctrl-C or SIGTERM: nothing is lost, and the user should not have to guess that
        again = "campaign run" + "".join(f" {flag} {value}" for flag, value, default in (
            ("--config", args.config, "campaigns.yaml"), ("--state", args.state, "state"), ("--db", args.db, None))
            if value != default) + "".join(f" --campaign {n}" for n in args.campaign)
        print(f"campaign run: stopped. Everything so far is in the store; `{again}` resumes where this run stopped "
              "(HITs already posted keep collecting answers meanwhile).", file=sys.stderr)
    if code == 0:
        exhausted = _exhausted(args, [c.name for c in spec.campaigns if not args.campaign or c.name in args.campaign])
        for c in spec.campaigns:
            if not args.campaign or c.name in args.campaign:
                out = Path(args.state) / c.name / "scores.csv"
                if c.name in exhausted:
                    print(f"{c.name}: budget_exhausted: the HITs posted were finished; raise the budget with "
                          f"`campaign budget {c.name} --set AMOUNT` and run again to go on")
                if out.is_file():
                    print(f"{c.name}: scores written to {out} and {out.with_suffix('.jsonl')}")
                usage = _prolific_usage(args, c.name) if c.prolific is not None else None
                if usage:
                    print(usage)
    return code


def _prolific_usage(args: argparse.Namespace, name: str) -> str | None:
    """`NAME: Prolific API calls: N for M submissions (X.X per submission; webhooks on)`: what the
    campaign cost Prolific's API (Prolific answers load with 429s and asks for webhooks, not polling)."""
    import json

    from campaign.prolific.studies import USAGE_KEY
    from campaign.store import Store

    store = Store.open(Path(args.state), args.db)
    try:
        raw = store.get_kv(name, USAGE_KEY, "")
    finally:
        store.close()
    if not raw:
        return None
    u = json.loads(raw)
    per = f"{u['api_calls'] / u['submissions']:.1f} per submission" if u.get("submissions") else "no submissions"
    return (f"{name}: Prolific API calls: {u['api_calls']} for {u['submissions']} submissions "
            f"({per}; webhooks {'on' if u.get('webhooks') else 'off'})")


def _exhausted(args: argparse.Namespace, names: list[str]) -> set[str]:
    """The campaigns a run left out of money, so the user is told rather than left to find out."""
    from campaign.store import CampaignRow, Store

    store = Store.open(Path(args.state), args.db)
    try:
        with store.session() as s:
            return {n for n in names if (row := s.get(CampaignRow, n)) is not None and row.status == CampaignStatus.BUDGET_EXHAUSTED}
    finally:
        store.close()


def cmd_status(args: argparse.Namespace) -> int:
    from campaign.dashboard import cli as dashboard_cli

    return dashboard_cli.cmd_status(args)


def cmd_ops(args: argparse.Namespace) -> int:
    from campaign import ops

    return getattr(ops, args.cmd)(args)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if getattr(args, "passthrough", False):
        args.rest = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    from campaign.store import StoreError

    try:
        return int(args.func(args) or 0)
    except StoreError as exc:  # missing (read-only), damaged, or from a newer campaign: a message, not a traceback
        print(f"campaign {args.cmd}: {exc}", file=sys.stderr)
        return 2
