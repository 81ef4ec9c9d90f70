"""`campaign held` and `campaign decide`: the operator's view of held rows and their decision on one.

`decide` writes the decision into the held row (the intent, in the store, like every operation from the
command line); the daemon's `decisions` step carries it out through the ledger and the marketplace on
its next pass (`campaign.steps.settle`), also for a finished campaign, which `campaign run` resumes for
it. Deciding the same thing again changes nothing; deciding otherwise once decided is refused.
"""

from __future__ import annotations

import argparse
import sys
import time
import unicodedata
from collections.abc import Callable
from typing import Any

from campaign.jsonout import dumps
from campaign.state import CampaignStatus, Decision, HeldKind, HeldStatus
from campaign.untrusted import inert

MAX_MESSAGE = 1024  # MTurk's RequesterFeedback limit: the message goes to the worker with the decision


def register(sub: argparse._SubParsersAction, common: Callable[[argparse.ArgumentParser], None]) -> None:
    h = sub.add_parser("held", help="rows a step failed on, held for the operator, with the reason")
    h.add_argument("name", nargs="?", default=None, help="only this campaign")
    h.add_argument("--all", action="store_true", help="settled rows too, with what became of them")
    h.add_argument("--json", action="store_true", help="print the rows as JSON")
    common(h)
    d = sub.add_parser("decide", help="settle a held row (carried out by the daemon's next pass, through the ledger "
                                      "and the marketplace)")
    d.add_argument("name", help="the campaign's name")
    d.add_argument("row", help="the held row, as `campaign held` names it (an assignment id, a HIT key, bonus:WORKER)")
    d.add_argument("decision", choices=[str(d) for d in Decision],
                   help="approve: pay it (post it, send it); reject: refuse it (the money is released); "
                        "drop: leave it out of the results (an answer is still paid; a HIT or bonus is abandoned); "
                        "paid / unpaid: a payment that may have gone through on Prolific (a work:SUBMISSION row, or a "
                        "bonus that may have been sent): you saw it paid there (booked, nothing sent) or not (sent now)")
    d.add_argument("--message", default=None, help="the feedback the worker sees with the decision")
    common(d)


def cmd_held(args: argparse.Namespace) -> int:
    from campaign.held import held_rows
    from campaign.ops import missing, open_existing

    store = open_existing(args)
    if store is None:
        return 2
    try:
        if args.name is not None and missing(store, args.name):
            return 2
        rows = held_rows(store, args.name, include_settled=args.all)
    finally:
        store.close()
    if args.json:
        print(dumps(rows, indent=2))
        return 0
    if not rows:
        print("nothing held" + (f" in {args.name}" if args.name else ""))
        return 0
    # one line per row, the row's name whole (it is what `campaign decide` takes), the reason under it
    for r in rows:
        status = r["status"] if r["decision"] is None or r["status"] != HeldStatus.HELD else f"{r['decision']} (waiting for the daemon)"
        print(f"{inert(r['campaign'])}  {inert(r['row'])}  {r['kind']} held by {r['step']}  {status}")
        print(f"    {inert(r['reason'])}" + (f" -> {inert(r['outcome'])}" if r["outcome"] else ""))
    print("settle one with `campaign decide NAME ROW approve|reject|drop [--message TEXT]` "
          "(a payment that may have gone through: paid|unpaid)")
    return 0


def _clean_message(text: str | None) -> str | None:
    """The operator's message as the worker will see it: no control characters, bounded."""
    if text is None:
        return None
    text = "".join(ch for ch in text if unicodedata.category(ch)[0] != "C" or ch in "\n\t").strip()
    if len(text) > MAX_MESSAGE:
        raise ValueError(f"--message is {len(text)} characters; the marketplace takes at most {MAX_MESSAGE}")
    return text or None


def cmd_decide(args: argparse.Namespace) -> int:
    from sqlalchemy import update
    from sqlmodel import col, select

    from campaign.ops import missing, open_existing
    from campaign.store import CampaignRow, HeldRow

    try:
        message = _clean_message(args.message)
    except ValueError as exc:
        print(f"campaign decide: {exc}", file=sys.stderr)
        return 2
    store = open_existing(args)
    if store is None:
        return 2
    try:
        if missing(store, args.name):
            return 2
        with store.session() as s:
            q = select(HeldRow).where(HeldRow.campaign == args.name)
            kind, _, key = args.row.partition(":")
            rows = s.exec(q.where(HeldRow.row_key == args.row)).all()
            if not rows and key:  # "assignment:ID" names the kind too
                rows = s.exec(q.where(HeldRow.row_kind == kind, HeldRow.row_key == key)).all()
            if not rows:
                print(f"campaign decide: {args.name} holds no row {args.row!r} (`campaign held {args.name}` lists them)",
                      file=sys.stderr)
                return 2
            if len(rows) > 1:
                print(f"campaign decide: {args.row!r} names {len(rows)} held rows; say which: "
                      + ", ".join(f"{r.row_kind}:{r.row_key}" for r in rows), file=sys.stderr)
                return 2
            row = rows[0]
            said = _said(row)
            if row.decision is not None or row.status != HeldStatus.HELD:
                if row.decision == args.decision:
                    print(f"{args.name}: {row.row_key}: {args.decision} was decided already ({said}); nothing changed")
                    return 0
                print(f"campaign decide: {row.row_key} is already decided: {said}", file=sys.stderr)
                return 2
            refused = _refused_for(row, args.decision)
            if refused:
                print(f"campaign decide: {row.row_key}: {refused}", file=sys.stderr)
                return 2
            camp = s.get(CampaignRow, args.name)
            if row.row_kind == HeldKind.HIT and args.decision == Decision.APPROVE and (camp is None or camp.status not in (CampaignStatus.RUNNING, CampaignStatus.PAUSED)):
                print(f"campaign decide: {args.name} is {camp.status if camp else 'gone'}: its HIT {row.row_key} "
                      "can no longer be posted; drop it to release its reservation", file=sys.stderr)
                return 2
            # only if still undecided: two `decide`s at once (or one racing the daemon) must not both
            # win, the later silently replacing a decision the daemon may be carrying out already
            taken = s.exec(update(HeldRow).where(col(HeldRow.id) == row.id, col(HeldRow.decision).is_(None),
                                                 col(HeldRow.status) == HeldStatus.HELD)
                           .values(decision=args.decision, message=message, decided_at=time.time()))
            if not taken.rowcount:
                s.rollback()
                print(f"campaign decide: {row.row_key} was decided meanwhile (`campaign held {args.name}` shows how)",
                      file=sys.stderr)
                return 2
            store.event(args.name, "decide", f"{row.row_kind} {row.row_key}: {args.decision}"
                        + (f" ({message})" if message else ""), subject=row.row_key, session=s)
    finally:
        store.close()
    print(f"{args.name}: {args.row}: {args.decision} recorded; the daemon carries it out on its next pass "
          f"(`campaign run` resumes a finished campaign for it)")
    return 0


def _refused_for(row: Any, decision: str) -> str | None:
    """Why `decision` does not fit this row, or None. An uncertain payment is a question of fact only
    the researcher can answer (was it paid?), so it takes paid/unpaid and nothing else; those two
    mean nothing for any other row."""
    import json

    uncertain = row.row_kind == HeldKind.WORK or (row.row_kind == HeldKind.BONUS
                                                  and bool(json.loads(row.data or "{}").get("may_have_been_sent")))
    if row.row_kind == HeldKind.WORK and decision not in (Decision.PAID, Decision.UNPAID):
        return ("this work pay may have been paid on Prolific: check the study's bonus payments there, then decide "
                "`paid` (it arrived: booked, nothing sent) or `unpaid` (it did not: sent now)")
    if decision in (Decision.PAID, Decision.UNPAID) and not uncertain:
        return f"{decision} is only for a payment that may have gone through (a work:SUBMISSION row or a bonus that may have been sent)"
    return None


def _said(row: Any) -> str:
    if row.status == HeldStatus.HELD:
        return f"{row.decision}, waiting for the daemon"
    return f"{row.decision or 'settled by the marketplace'}: {row.outcome}"
