"""`campaign status`: Rich tables drawn from `figures` (read-only), fitted to the terminal's width.

The live, full-screen view (`status --watch`, `campaign dashboard`) is campaign.dashboard.app."""

from __future__ import annotations

import time

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from campaign.money import shown
from campaign.pay import work_time_text
from campaign.readmodel.figures import collect_figures
from campaign.store import Store
from campaign.untrusted import for_rich

WIDE = 150


def build(figures: dict, width: int = WIDE) -> Group:
    """Wide terminals get one table row per campaign; narrower ones (80 columns and up) a block of
    three lines per campaign, so no name, status or amount is ever cut to an ellipsis."""
    parts: list = []
    if width >= WIDE:
        overview = Table(title="campaigns", expand=True)
        for col in ("campaign", "status", "HITs posted/assignable/done", "answers sub/appr/rej", "progress",
                    "spent", "reserved", "fees", "budget", "projected"):
            overview.add_column(col, no_wrap=col == "campaign", overflow="fold")
        for c in figures["campaigns"]:
            h, a, m, p = c["hits"], c["assignments"], c["money"], c["progress"]
            bar = "#" * int(p["fraction"] * 20)
            overview.add_row(for_rich(c["name"]), c["status"] + (f": {c['waiting_for']}" if c.get("waiting_for") else ""), f"{h['posted']}/{h['assignable']}/{h['completed']}",
                             f"{a['submitted']}/{a['approved']}/{a['rejected']}", for_rich(f"[{bar:<20}] {p['fraction']:.0%}"),
                             *(shown(m[k], c["currency"]) for k in ("spent", "reserved", "fees", "budget", "projected")))
        parts.append(overview)
    else:
        parts.append(Text("campaigns", style="bold"))
        for c in figures["campaigns"]:
            h, a, m, p = c["hits"], c["assignments"], c["money"], c["progress"]
            t = Text(overflow="fold")
            t.append(c["name"], style="bold")
            t.append(f"  {c['status']}  ")
            bar = "#" * int(p["fraction"] * 20)
            t.append(f"[{bar:<20}] {p['fraction']:.0%}\n")
            if c.get("waiting_for"):
                t.append(f"  cancelling: {c['waiting_for']}\n", style="magenta")
            t.append(f"  HITs {h['posted']}/{h['assignable']}/{h['completed']} posted/assignable/done · "
                     f"answers {a['submitted']}/{a['approved']}/{a['rejected']} sub/appr/rej\n")
            cur = c["currency"]
            t.append(f"  spent {shown(m['spent'], cur)} · reserved {shown(m['reserved'], cur)} · fees {shown(m['fees'], cur)} · "
                     f"budget {shown(m['budget'], cur)} · projected {shown(m['projected'], cur)}")
            parts.append(t)
    for c in figures["campaigns"]:
        q = c["quality"]
        qt = Table(title=f"{for_rich(c['name'])}: quality and events", expand=True)
        qt.add_column("what", overflow="fold")
        qt.add_column("value", overflow="fold")
        qt.add_row("agreement r (worker vs rest, label-weighted)", "-" if q["agreement"] is None else f"{q['agreement']:.2f}")
        qt.add_row("trap pass rate", "-" if q["trap_pass_rate"] is None else f"{q['trap_pass_rate']:.0%}")
        eta = c["progress"]["eta_seconds"]
        qt.add_row("ETA at the recent rate", "-" if eta is None else f"{eta // 60} min {eta % 60} s")
        qt.add_row("workers (active / excluded / blocked)", f"{q['workers']} / {q['workers_excluded']} / {q['workers_blocked']}")
        qt.add_row("labels excluded", q["labels_excluded_text"])
        for w in q["worst_workers"]:
            qt.add_row(f"worker {for_rich(w['worker'])}", for_rich(str(w["reason"])))
        if c.get("pilot"):
            qt.add_row("Prolific pilot", for_rich(c["pilot"]))
        held = c.get("held") or {}
        if held.get("open"):
            waiting = f", {held['waiting']} decided, waiting for the daemon" if held.get("waiting") else ""
            qt.add_row("held for the operator", f"{held['open']}{waiting} (`campaign held {for_rich(c['name'])}`)")
            for r in held.get("rows", [])[:5]:
                qt.add_row(f"held {for_rich(r['kind'])} {for_rich(r['row'])}", for_rich(f"{r['step']}: {r['reason']}"))
        costs = c.get("reconciliation") or []
        for r in costs:
            if r.get("booked") != r.get("charged"):
                qt.add_row(Text(f"money NOT reconciled: study {r['key']} (Prolific {r['study']})", style="bold red"),
                           for_rich(f"the ledger booked {shown(r['booked'], c['currency'])}, the service charged "
                                  f"{shown(r['charged'], c['currency'])}"))
        if costs and all(r.get("booked") == r.get("charged") for r in costs):
            qt.add_row("studies reconciled with the service's charges", f"{len(costs)} of {len(costs)}, to the penny")
        for st in c["stages"]:
            if st.get("median_work_seconds") is not None:
                pay = "no hourly figure (no time between accept and submit)" if st.get("hourly_pay") is None \
                    else f"{shown(st['hourly_pay'], c['currency'])} an hour"
                qt.add_row(f"stage {for_rich(st['name'])}: median work time, pay",
                           f"{work_time_text(st['median_work_seconds'])}, {pay}")
        # whole messages, wrapped by the table (overflow="fold"): a cut sentence reads as a different one
        for e in c["events"][:5]:
            qt.add_row(f"{time.strftime('%H:%M:%S', time.localtime(e['ts']))} {e['level']}", for_rich(e["message"]))
        parts.append(qt)
    return Group(*parts)


def render_once(store: Store, console: Console | None = None) -> None:
    console = console or Console()
    console.print(build(collect_figures(store), console.width))
