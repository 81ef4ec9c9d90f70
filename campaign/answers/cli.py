"""Command line of the answers export and of erasure on request: `campaign export NAME --answers` (the
export parser itself is `campaign.commands`'s; this module's `export` decides between scores and
answers) and `campaign forget WORKER`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from campaign.store import Store


def add_export_options(ex: argparse.ArgumentParser) -> None:
    """The options `campaign export` has for the answers export (and its --format, shared with scores)."""
    ex.add_argument("--format", choices=("csv", "tsv", "jsonl"), default=None,
                    help="output format: csv or jsonl for scores (default csv), tsv, csv or jsonl for --answers (default tsv)")
    ex.add_argument("--answers", action="store_true",
                    help="every answer instead of the scores: one row per answer per item (see docs/answers-export.md)")
    ex.add_argument("--raw-ids", action="store_true",
                    help="with --answers: real worker ids instead of the campaign's pseudonyms (personal data)")
    ex.set_defaults(func=export)


def export(args: argparse.Namespace) -> int:
    if not args.answers:
        if args.raw_ids:
            print("campaign export: --raw-ids goes with --answers (scores hold no worker ids)", file=sys.stderr)
            return 2
        if args.format == "tsv":
            print("campaign export: scores are written as csv or jsonl; tsv is for --answers", file=sys.stderr)
            return 2
        args.format = args.format or "csv"
        from campaign import ops

        return ops.export(args)
    return export_answers(args)


def export_answers(args: argparse.Namespace) -> int:
    from campaign.answers.export import answer_rows, render
    from campaign.ops import missing, open_existing

    store = open_existing(args)
    if store is None or missing(store, args.name):
        return 2
    fmt = args.format or "tsv"
    try:
        n = 0

        def counted() -> Iterator[dict[str, Any]]:
            nonlocal n
            for r in answer_rows(store, args.name, raw_ids=args.raw_ids):
                n += 1
                yield r

        if args.out:
            from campaign.outfile import OutputError, write_out

            out = Path(args.out)
            try:
                write_out(out, render(counted(), fmt))
            except OutputError as exc:
                print(f"campaign export: {exc}", file=sys.stderr)
                return 2
            ids = "worker ids" if args.raw_ids else "pseudonymised worker ids"
            print(f"{n} answer rows written to {out} ({ids})", file=sys.stderr)
        else:
            try:
                for chunk in render(counted(), fmt):
                    sys.stdout.write(chunk)
                sys.stdout.flush()
            except BrokenPipeError:  # `| head`: the reader has what it wanted
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (nothing more is written; closed at exit)
    finally:
        store.close()
    return 0


def register(sub: argparse._SubParsersAction, common: Callable[[argparse.ArgumentParser], None]) -> None:
    f = sub.add_parser("forget", help="erase a person's personal data from the store on request (the ledger keeps its amounts)")
    f.add_argument("worker", metavar="WORKER",
                   help="the worker id, Prolific participant id, or pseudonym (from an answers export) to erase")
    f.add_argument("--campaign", default=None, metavar="NAME", help="only this campaign's rows (default: every campaign)")
    common(f)
    f.set_defaults(func=cmd_forget)


def cmd_forget(args: argparse.Namespace) -> int:
    from campaign.answers.forget import ForgetError, files_holding, forget, identities, resolve_pseudonym
    from campaign.ops import missing, open_existing
    from campaign.runlock import AlreadyRunning, state_lock

    store = open_existing(args)
    if store is None:
        return 2
    try:
        if args.campaign is not None and missing(store, args.campaign):
            return 2
        given = args.worker.strip()
        ids = resolve_pseudonym(store, given) or identities(given)
        try:
            if args.db is None:  # the daemon's lock, held meanwhile: no daemon writes the id back from memory
                with state_lock(Path(args.state)):
                    done = forget(store, ids, args.campaign)
            else:
                daemon = _live_daemon(store)
                if daemon is not None:
                    raise ForgetError(f"a campaign daemon ({daemon}) is running on this store; stop it first, "
                                      "or it may write the id back from memory")
                done = forget(store, ids, args.campaign)
        except (ForgetError, AlreadyRunning) as exc:
            print(f"campaign forget: {exc}", file=sys.stderr)
            return 2
    finally:
        store.close()
    if not done.tombstones:
        print(f"campaign forget: {given!r} is in no campaign of the store; nothing was changed", file=sys.stderr)
        return 2
    for camp, tomb in sorted(done.tombstones.items()):
        print(f"{camp}: now {tomb}")
    changed = ", ".join(f"{t} {n}" for t, n in sorted(done.cells.items()))
    print(f"erased: {done.answers_cleared} raw answers; ids replaced in {changed or 'no cells'}; ledger amounts unchanged")
    if args.db is None:
        left = files_holding(Path(args.state), ids)
        if left:
            print("files under the state folder still hold the id (exports and reports written before, the built-in "
                  "marketplace's own records): " + ", ".join(str(p) for p in left), file=sys.stderr)
    return 0


def _live_daemon(store: Store) -> str | None:
    """The holder of an unexpired lease on a shared store (a daemon at work), or None."""
    import time

    from sqlmodel import col, select

    from campaign.leases import LeaseRow

    with store.session() as s:
        row = s.exec(select(LeaseRow).where(col(LeaseRow.expires_at) >= time.time())).first()
    return None if row is None else row.holder
