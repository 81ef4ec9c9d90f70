"""The terminal dashboard: Rich tables drawn from `figures` (read-only), once or live with --watch."""

from __future__ import annotations

import time

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from campaign.dashboard.figures import collect_figures
from campaign.store import Store


def build(figures: dict) -> Group:
    parts = []
    overview = Table(title="campaigns", expand=True)
    for col in ("campaign", "status", "HITs posted/assignable/done", "answers sub/appr/rej", "progress",
                "spent", "reserved", "fees", "budget", "projected"):
        overview.add_column(col)
    for c in figures["campaigns"]:
        h, a, m, p = c["hits"], c["assignments"], c["money"], c["progress"]
        bar = "#" * int(p["fraction"] * 20)
        overview.add_row(escape(c["name"]), c["status"], f"{h['posted']}/{h['assignable']}/{h['completed']}",
                         f"{a['submitted']}/{a['approved']}/{a['rejected']}", f"[{bar:<20}] {p['fraction']:.0%}",
                         f"${m['spent']}", f"${m['reserved']}", f"${m['fees']}", f"${m['budget']}", f"${m['projected']}")
    parts.append(overview)
    for c in figures["campaigns"]:
        q = c["quality"]
        t = Table(title=f"{escape(c['name'])}: quality and events", expand=True)
        t.add_column("what")
        t.add_column("value")
        t.add_row("agreement (worker vs rest, label-weighted r)", "-" if q["agreement"] is None else f"{q['agreement']:.2f}")
        t.add_row("trap pass rate", "-" if q["trap_pass_rate"] is None else f"{q['trap_pass_rate']:.0%}")
        eta = c["progress"]["eta_seconds"]
        t.add_row("ETA at the recent rate", "-" if eta is None else f"{eta // 60} min {eta % 60} s")
        t.add_row("workers (active / excluded / blocked)", f"{q['workers']} / {q['workers_excluded']} / {q['workers_blocked']}")
        t.add_row("labels excluded", f"{q['labels_excluded']} of {q['labels']}")
        for w in q["worst_workers"]:
            t.add_row(f"worker {escape(w['worker'])}", escape(str(w["reason"])))
        for e in c["events"][:5]:
            t.add_row(f"{time.strftime('%H:%M:%S', time.localtime(e['ts']))} {e['level']}", escape(e["message"][:120]))
        parts.append(t)
    return Group(*parts)


def render_once(store: Store, console: Console | None = None) -> None:
    (console or Console()).print(build(collect_figures(store)))


def watch(store: Store, interval: float = 1.0) -> int:
    console = Console()
    try:
        with Live(build(collect_figures(store)), console=console, refresh_per_second=4, screen=False) as live:
            while True:
                time.sleep(interval)
                live.update(build(collect_figures(store)))
    except KeyboardInterrupt:
        return 0
