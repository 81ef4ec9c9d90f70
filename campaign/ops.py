"""Operations on a campaign from the command line: they write the user's intent to the store and the
daemon carries it out on its next tick, so they work whether or not the daemon is running now, and
survive a restart (the intent is in the store, not in a process).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlmodel import col, select

from campaign.jsonout import dumps
from campaign.state import DONE, CampaignStatus, Keys, WorkerStanding
from campaign.store import CampaignRow, EventRow, Store, WorkerRow, move_status
from campaign.untrusted import for_rich, inert


def open_existing(args: argparse.Namespace) -> Store | None:
    """The store named by --state/--db, or None (after saying so) when there is none yet.

    Only `run` creates a store: a command that reads or changes a campaign opening an empty folder (or
    an empty database) would otherwise leave a fresh, empty store behind and report on nothing.
    """
    where = _existing_store(args.state, args.db)
    if where is not None:
        print(f"campaign {args.cmd}: no campaign store at {where} (start one with `campaign run`, "
              "or name it with --state DIR or --db URL)", file=sys.stderr)
        return None
    return Store.open(args.state, args.db)


def _existing_store(state: str, db: str | None) -> str | None:
    """None when a store exists; otherwise where it was looked for (a URL without its password)."""
    if db is None:
        path = Path(state) / "campaign.db"
        return None if path.is_file() else str(path)
    from sqlalchemy import create_engine, inspect
    from sqlalchemy.engine import make_url

    url = make_url(db)
    shown = url.render_as_string(hide_password=True)
    if url.get_backend_name() == "sqlite":  # connecting would create the file
        return None if url.database and url.database != ":memory:" and Path(url.database).is_file() else shown
    engine = create_engine(url)
    try:
        return None if inspect(engine).has_table(CampaignRow.__tablename__) else shown
    finally:
        engine.dispose()


def missing(store: Store, name: str) -> bool:
    """True (after saying so) when the store has no campaign of that name."""
    with store.session() as s:
        if s.get(CampaignRow, name) is not None:
            return False
    from sqlalchemy.engine import make_url

    shown = make_url(store.url).render_as_string(hide_password=True)  # a database password is a credential
    print(f"campaign: no campaign named {name!r} in {shown}", file=sys.stderr)
    return True


def _set_status(args: argparse.Namespace, allowed_from: tuple[str, ...], to: str, message: str) -> int:
    store = open_existing(args)
    if store is None or missing(store, args.name):
        return 2
    with store.session() as s:
        # one conditional UPDATE: the daemon may move the campaign on (finished, out of money, blocked)
        # between a read and a write here, and a paused or cancelling campaign must not be made of a
        # finished one
        if not move_status(s, args.name, to, allowed_from):
            s.rollback()
            row = s.get(CampaignRow, args.name)
            print(f"campaign: {args.name} is {row.status if row else 'gone'}; cannot {args.cmd} it", file=sys.stderr)
            return 2
        store.event(args.name, args.cmd, message, session=s)
    print(f"{args.name}: {message}")
    return 0


def pause(args: argparse.Namespace) -> int:
    return _set_status(args, (CampaignStatus.RUNNING,), CampaignStatus.PAUSED, "paused: no new HITs are posted and no work is reviewed")


def resume(args: argparse.Namespace) -> int:
    # blocked: a marketplace refused a change; the researcher has acted on it
    return _set_status(args, (CampaignStatus.PAUSED, CampaignStatus.BLOCKED), CampaignStatus.RUNNING, "resumed")


def cancel(args: argparse.Namespace) -> int:
    return _set_status(args, (CampaignStatus.RUNNING, CampaignStatus.PAUSED), CampaignStatus.CANCELLING,
                       "cancelling: outstanding HITs will be expired and their reservations released by the daemon")


def extend(args: argparse.Namespace) -> int:
    from campaign.steps.control import MAX_EXTEND_HOURS, extend_hours

    if not math.isfinite(args.hours) or args.hours <= 0 or args.hours > MAX_EXTEND_HOURS:
        print(f"campaign extend: --hours {args.hours:g}: must be above 0 and at most {MAX_EXTEND_HOURS:g} "
              "(a HIT lives at most a year)", file=sys.stderr)
        return 2
    store = open_existing(args)
    if store is None or missing(store, args.name):
        return 2
    with store.session() as s:
        row = s.get(CampaignRow, args.name)
        status = row.status if row is not None else ""
    if status in DONE:
        print(f"campaign extend: {args.name} is {status}; it has no open HITs to extend", file=sys.stderr)
        return 2
    for _ in range(100):  # the daemon may clear the intent meanwhile: add to what is stored, or try again
        stored = store.get_kv(args.name, Keys.EXTEND_HOURS)
        pending = (extend_hours(stored or "0") or 0.0) + args.hours
        if pending > MAX_EXTEND_HOURS:
            print(f"campaign extend: {pending - args.hours:g} h are already asked for; with {args.hours:g} more the "
                  f"extension would pass {MAX_EXTEND_HOURS:g} h (a HIT lives at most a year)", file=sys.stderr)
            return 2
        if store.swap_kv(args.name, Keys.EXTEND_HOURS, stored, str(pending)):
            break
    else:
        print("campaign extend: the stored extension kept changing under this command; nothing was added, "
              "try again", file=sys.stderr)
        return 1
    store.event(args.name, "extend", f"open HITs will be extended by {args.hours} h")
    print(f"{args.name}: open HITs will be extended by {args.hours} h on the daemon's next tick")
    return 0


def register(sub: argparse._SubParsersAction, common: Callable[[argparse.ArgumentParser], None]) -> None:
    b = sub.add_parser("budget", help="set a campaign's budget (raise it to go on after budget_exhausted)")
    b.add_argument("name", help="the campaign's name, as in its spec")
    b.add_argument("--set", dest="amount", required=True, metavar="AMOUNT", help="the new budget in the campaign's currency (dollars; Prolific: its prolific.currency), e.g. 50.00")
    common(b)
    b.set_defaults(func=budget)


def budget(args: argparse.Namespace) -> int:
    """Write the new budget as an intent; the daemon's next tick adopts it (`campaign.steps.budget`)."""
    from campaign.ledger import totals
    from campaign.money import MoneyError, fmt, parse_amount, shown
    from campaign.spec import currency_of

    try:
        amount = parse_amount(args.amount)
    except MoneyError as exc:
        print(f"campaign budget: --set {args.amount}: {exc}", file=sys.stderr)
        return 2
    store = open_existing(args)
    if store is None or missing(store, args.name):
        return 2
    with store.session() as s:
        row = s.get(CampaignRow, args.name)
        assert row is not None  # checked by missing()
        if row.status in DONE:
            print(f"campaign budget: {args.name} is {row.status}; its budget no longer matters", file=sys.stderr)
            return 2
        t = totals(s, args.name, Decimal(row.budget))
        committed = t.spent + t.reserved
        cur = currency_of(json.loads(row.spec_json or "{}"))
        if amount < committed:
            print(f"campaign budget: {shown(amount, cur)} is below the {shown(committed, cur)} already committed (spent or reserved) "
                  f"by {args.name}", file=sys.stderr)
            return 2
        store.set_kv(args.name, Keys.BUDGET_SET, fmt(amount), session=s)
        store.event(args.name, "budget", f"budget {shown(row.budget, cur)} -> {shown(amount, cur)} requested", session=s)
        status = row.status
    again = " and posting resumes" if status == CampaignStatus.BUDGET_EXHAUSTED else ""
    print(f"{args.name}: budget {shown(amount, cur)} (was {shown(row.budget, cur)}); the daemon adopts it on its next tick{again}")
    return 0


def export(args: argparse.Namespace) -> int:
    from campaign.readmodel.scores import EXPORT_COLUMNS, compute_scores, scores_csv, scores_jsonl

    store = open_existing(args)
    if store is None or missing(store, args.name):
        return 2
    with store.session() as s:
        row = s.get(CampaignRow, args.name)
    assert row is not None  # checked by missing()
    out_dir = Path(args.state) / args.name
    written = out_dir / ("scores.csv" if args.format == "csv" else "scores.jsonl")
    if row.status == CampaignStatus.FINISHED and written.is_file():
        text = written.read_text(encoding="utf-8")  # the final export, ranking stage included
    else:  # a running campaign: scores so far from the first stage
        last = json.loads(row.spec_json)["stages"][0]
        scores = compute_scores(store, args.name, last["name"], last["kind"])
        text = scores_csv(scores, EXPORT_COLUMNS) if args.format == "csv" else scores_jsonl(scores, EXPORT_COLUMNS)
    items = max(text.count("\n") - (args.format == "csv"), 0)
    if args.out:
        from campaign.outfile import OutputError, write_out

        try:
            write_out(Path(args.out), [text])
        except OutputError as exc:
            print(f"campaign export: {exc}", file=sys.stderr)
            return 2
        print(f"{items} items written to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
        if not items:  # said on standard error: a script reading the file gets the header as before
            print(f"campaign export: {args.name} has no scored item yet", file=sys.stderr)
    return 0


def workers(args: argparse.Namespace) -> int:
    store = open_existing(args)
    if store is None or missing(store, args.name):
        return 2
    from campaign.held import held_by_worker

    with store.session() as s:
        rows = s.exec(select(WorkerRow).where(WorkerRow.campaign == args.name).order_by(WorkerRow.worker_id)).all()
        held = held_by_worker(s, args.name)  # rows of theirs a step failed on, waiting for the operator
    data: list[dict[str, Any]] = [{"worker": w.worker_id, "assignments": w.assignments, "excluded": w.excluded, "blocked": w.blocked,
             "reason": w.reason, "evidence": json.loads(w.evidence) if w.evidence else None,
             "held": held.get(w.worker_id, 0)} for w in rows]
    if args.json:
        print(dumps(data, indent=2))
        return 0
    if not data:  # an empty table with headings reads like a fault
        print(f"no worker has answered {args.name} yet")
        return 0
    from rich.console import Console
    from rich.table import Table

    # short columns so the table fits 80 columns; the reasons, which are sentences, follow it as wrapped lines
    from campaign.readmodel.definitions import worker_figure

    figure_key, figure_head, figure_note = worker_figure(d["evidence"] for d in data)
    t = Table(title=f"workers of {args.name}")
    for heading in ("worker", "answers", "labels", figure_head, "shared", "traps", "decision"):
        t.add_column(heading, no_wrap=True, justify="left" if heading in ("worker", "decision") else "right")
    reasons = []
    for d in data:
        e = d["evidence"] or {}
        r = e.get(figure_key)
        decision = " + ".join(w for w, flag in ((WorkerStanding.EXCLUDED, d["excluded"]), (WorkerStanding.BLOCKED, d["blocked"]),
                                                 (f"{d['held']} held", d["held"])) if flag)
        t.add_row(for_rich(d["worker"]), str(d["assignments"]), str(e.get("labels", "")), "" if r is None else f"{r:.2f}",
                  str(e.get("shared_items", "")), f"{e.get('traps_passed', 0)}/{e.get('traps_seen', 0)}" if e else "", decision)
        if d["reason"]:
            reasons.append(f"[bold]{for_rich(d['worker'])}[/bold] ({decision or 'kept'}): {for_rich(str(d['reason']))}")
    console = Console()
    console.print(t)
    if figure_note and data:
        console.print(figure_note)
    if reasons:
        console.print("reasons:")
        for line in reasons:
            console.print(line)
    if held:
        console.print(f"{sum(held.values())} row(s) held for the operator: `campaign held {for_rich(args.name)}`")
    return 0


def events(args: argparse.Namespace) -> int:
    store = open_existing(args)
    if store is None or missing(store, args.name):
        return 2
    levels = {"info": ("info", "warning", "error"), "warning": ("warning", "error"), "error": ("error",)}[args.level]
    query = select(EventRow).where(EventRow.campaign == args.name)
    if args.level != "info":  # the last N of those asked for, not the last N events filtered afterwards
        query = query.where(col(EventRow.level).in_(levels))
    if args.kind:
        query = query.where(col(EventRow.kind).in_(args.kind))
    with store.session() as s:
        rows = s.exec(query.order_by(col(EventRow.id).desc()).limit(args.limit)).all()
    rows = list(reversed(rows))
    if args.json:
        print(dumps([{"ts": e.ts, "level": e.level, "kind": e.kind, "subject": e.subject, "message": e.message,
                           "data": json.loads(e.data) if e.data else None} for e in rows], indent=2))
        return 0
    for e in rows:
        # worker-controlled text can carry terminal escapes: print it inert
        msg = inert(e.message)
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(e.ts))} {e.level:7} {e.kind:16} {msg}")
    return 0
