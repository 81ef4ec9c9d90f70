"""The full-screen layout: a pure function of a snapshot, the UI state and the terminal's size.

Laid out anew for every size: from 80x24 up it shows the header, the campaign list, the selected
campaign's stage panels, quality sparklines, recent exclusions and the event log; from 140 columns on
the quality and event panes move to a right-hand column and every campaign's stages get a panel.
Campaign names and statuses are never cut: they fold onto a second line instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from rich.console import Group, RenderableType
from rich.layout import Layout
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from campaign.money import CURRENCY_SIGNS
from campaign.readmodel.definitions import cancel_waiting, excluded_share, excluded_text, worker_figure
from campaign.readmodel.series import fraction, human_seconds, sparkline
from campaign.readmodel.snapshot import CampaignView, Snapshot, StageView
from campaign.state import ACTIVE, DONE, CampaignStatus, WorkerStanding
from campaign.untrusted import for_rich, inert

WIDE = 140
LEVEL_STYLE = {"info": "", "warning": "bold yellow", "error": "bold red"}
STATUS_STYLE: dict[str, str] = {CampaignStatus.RUNNING: "green", CampaignStatus.PAUSED: "yellow", CampaignStatus.CANCELLING: "magenta",
                              CampaignStatus.CANCELLED: "red", CampaignStatus.FINISHED: "cyan", CampaignStatus.BUDGET_EXHAUSTED: "red"}


@dataclass
class UIState:
    selected: int = 0
    mode: str = "main"  # main | workers | confirm_cancel | filter
    event_filter: str = ""
    filter_draft: str = ""
    message: str = ""
    message_style: str = ""
    seen_event_id: int = 0  # warnings/errors above this id are pinned until marked seen (`a`)
    waiting_ack: dict[str, int] = field(default_factory=dict)  # campaign -> id of the intent's event
    workers: list[dict[str, Any]] = field(default_factory=list)
    width: int = 80


def bar(part: float | Decimal, whole: float | Decimal, width: int, style: str = "green") -> Text:
    f = min(max(fraction(part, whole), 0.0), 1.0)
    full = int(round(f * width))
    t = Text()
    t.append("█" * full, style=style)
    t.append("░" * (width - full), style="grey50")
    return t


def money(x: Decimal, currency: str = "USD") -> str:
    """An amount with thousands separators, in its campaign's currency ("$1,234.50", "\u00a312.00")."""
    sign = CURRENCY_SIGNS.get(currency)
    return f"{sign}{x:,.2f}" if sign else f"{x:,.2f} {currency}"


def clock_time(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%H:%M", time.localtime(ts))


def header(snap: Snapshot, width: int) -> Text:
    """Two lines at 80 columns: when, how fast and whether a daemon works; then the money."""
    t = Text(no_wrap=False, overflow="fold")
    t.append("campaign dashboard", style="bold")
    t.append(f" {time.strftime('%H:%M:%S', time.localtime(snap.taken_at))}")
    t.append(f" · last hour: {snap.answers_per_hour:,.0f} answers from {snap.workers_active} workers · ")
    lives = [c.live for c in snap.campaigns if c.status not in DONE]
    if lives and not any(lv.live for lv in lives):
        if width < 120:
            t.rstrip()
            t.rstrip_end(len(t.plain.rstrip(" ·")))
            t.append("\n")
        t.append(" NO DAEMON RUNNING: figures as of its last write ", style="bold white on red")
    elif lives:
        t.append("daemon live", style="green")
    else:
        t.append("all done", style="cyan")
    t.append("\n")
    for i, (cur, (spent, reserved, budget)) in enumerate(sorted(snap.money_by_currency().items())):
        if i:  # campaigns paying in another currency: their own line, never added to the first
            t.append("\n")
        committed = spent + reserved
        t.append(f"spent {money(spent, cur)} + reserved {money(reserved, cur)} / budget {money(budget, cur)}",
                 style="bold red" if budget and committed >= budget else "")
        if budget:
            t.append(f" ({fraction(committed, budget):.0%} committed)")
    return t


def campaign_list(snap: Snapshot, ui: UIState, width: int, max_rows: int = 1000) -> Text:
    """One line per campaign; when there are more than `max_rows`, a window around the selected one."""
    t = Text(overflow="fold")
    gauge = 10 if width < 100 else 20
    n = len(snap.campaigns)
    lo, hi = 0, n
    if n > max_rows:
        shown = max(max_rows - 1, 1)
        lo = min(max(ui.selected - shown // 2, 0), n - shown)
        hi = lo + shown
    lines = 0
    for i in range(lo, hi):
        c = snap.campaigns[i]
        sel = i == ui.selected
        t.append("▶ " if sel else "  ", style="bold")
        t.append(c.name, style="bold reverse" if sel else "bold")
        t.append(" ")
        t.append(c.status, style=STATUS_STYLE.get(c.status, ""))
        if not c.live.live and c.status not in DONE:
            t.append(" (no daemon)", style="red")
        t.append("  ")
        t.append_text(bar(c.committed, c.budget, gauge, "red" if c.budget and c.committed >= c.budget * Decimal("0.8") else "green"))
        t.append(f" {money(c.spent, c.currency)}+{money(c.reserved, c.currency)}/{money(c.budget, c.currency)}")
        lines += 1
        if i < hi - 1:
            t.append("\n")
    if (lo, hi) != (0, n):
        t.append(f"\n  … {lo} above, {n - hi} below (j/k to move)", style="grey62")
    return t


def stage_panel(c: CampaignView, st: StageView, width: int) -> Panel:
    bw = max(10, min(40, width - 40))
    g = Table.grid(padding=(0, 1))
    g.add_column(no_wrap=True)
    g.add_column(no_wrap=True)
    g.add_column(overflow="fold")
    g.add_row("HITs posted", bar(st.hits_posted, st.hits_planned, bw), f"{st.hits_posted}/{st.hits_planned}")
    g.add_row("collected", bar(st.collected, st.slots, bw), f"{st.collected}/{st.slots}")
    g.add_row("reviewed", bar(st.reviewed, st.collected, bw), f"{st.reviewed}/{st.collected}")
    lines = []
    if st.earliest_auto_approval is not None:
        left = st.earliest_auto_approval - c.clock_now
        style = "bold red" if left < st.auto_approval_delay / 4 else ""
        lines.append(Text(f"oldest of {st.pending} unreviewed answers is auto-approved in {human_seconds(left)}", style=style))
    if st.pairs is not None:
        prec = "-" if st.precision is None else f"{st.precision:.3f}"
        lines.append(Text(f"ranking: batch {st.batch} · {st.pairs:,} pairs compared · expected top-{st.keep} precision {prec}"))
    sw = max(8, min(24, (width - 40) // 3))
    q = Text()
    q.append("agree ")
    q.append(sparkline(st.agreement, sw, 0.0, 1.0), style="cyan")
    # beside each history, the stage's figure as `campaign status` and the summary line define it
    # (campaign.readmodel.definitions), not the last bucket's, so one label never shows two values
    q.append(f" {'-' if st.agreement_now is None else f'{st.agreement_now:.2f}'}  traps ")
    q.append(sparkline(st.trap_pass, sw, 0.0, 1.0), style="green")
    q.append(f" {'-' if st.trap_pass_now is None else f'{st.trap_pass_now:.0%}'}  excl ")
    q.append(sparkline(st.excluded_share, sw, 0.0, 1.0), style="red")
    share = excluded_share(st.labels, st.labels_excluded)
    q.append(f" {'-' if share is None else f'{share:.0%}'}")
    lines.append(q)
    title = Text()
    title.append(f"{c.name} / {st.name}", style="bold")
    return Panel(Group(g, *lines), title=title, title_align="left", padding=(0, 1))


def campaign_summary(c: CampaignView, width: int) -> Text:
    t = Text(overflow="fold")
    t.append(f"{c.name}: ", style="bold")
    t.append(c.status, style=STATUS_STYLE.get(c.status, ""))
    if c.status == CampaignStatus.CANCELLING:
        t.append(": " + cancel_waiting(sum(st.hits_posted - st.hits_closed for st in c.stages), sum(st.pending for st in c.stages)),
                 style=STATUS_STYLE["cancelling"])
    if c.status in ACTIVE:
        t.append(f"  spend {money(c.spend_per_hour, c.currency)}/h · {c.answers_per_hour:,.0f} answers/h")
    if c.finish_at is not None and c.finish_at <= c.clock_now:
        t.append(f" · all answers in; final cost {money(c.projected_cost, c.currency)}")
    elif c.finish_at is not None:
        left = human_seconds(c.finish_at - c.clock_now)
        # a simulated clock runs ahead of the wall: its time of day would mislead, its durations do not
        when = f"in {left} of simulated time" if c.clock_speed != 1 else f"{clock_time(c.finish_at)}, in {left}"
        t.append(f" · finish {when} at {money(c.projected_cost, c.currency)}")
    else:
        t.append(f" · final cost {money(c.projected_cost, c.currency)}")
    t.append("\n")
    t.append(c.live.message, style="green" if c.live.live else ("red" if c.status not in DONE else "cyan"))
    if c.agreement is not None or c.trap_pass_rate is not None:
        t.append(f"  ·  r {c.agreement:.2f}" if c.agreement is not None else "")
        t.append(f" · traps {c.trap_pass_rate:.0%}" if c.trap_pass_rate is not None else "")
    t.append(f" · workers {c.workers} ({c.workers_excluded} excl, {c.workers_blocked} blocked) · labels excl {excluded_text(c.labels, c.labels_excluded)}")
    if c.held:
        t.append(f" · {c.held} held for the operator (campaign held {c.name})", style="red")
    return t


def exclusions(c: CampaignView, rows: int, width: int) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    for ts, kind, worker, reason in c.exclusions[:rows]:
        verb = WorkerStanding.BLOCKED if kind == "worker_blocked" else WorkerStanding.EXCLUDED
        t.append(f"{time.strftime('%H:%M:%S', time.localtime(ts))} {verb} {worker}: ", style="yellow")
        t.append(_few_words(reason, max(20, width - 40)))
        t.append("\n")
    if not c.exclusions:
        t.append("no worker excluded or blocked yet", style="grey50")
    t.rstrip()
    return t


def _few_words(reason: str, limit: int) -> str:
    first = reason.split(";")[0].split("(")[0].strip()
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def event_lines(c: CampaignView, ui: UIState, rows: int) -> Text:
    events = c.events
    if ui.event_filter:
        needle = ui.event_filter.lower()
        events = [e for e in events if needle in e["kind"].lower() or needle in e["message"].lower()]
    pinned = [e for e in events if e["level"] in ("warning", "error") and e["id"] > ui.seen_event_id]
    t = Text(no_wrap=True, overflow="ellipsis")
    shown = 0
    if pinned:
        for e in pinned[: max(1, min(3, rows // 2))]:
            _event(t, e, pin=True)
            shown += 1
        if len(pinned) > shown:
            t.append(f"  +{len(pinned) - shown} more unseen warnings/errors (a: mark seen)\n", style="bold yellow")
            shown += 1
    pinned_ids = {e["id"] for e in pinned[:shown]}
    for e in events:
        if shown >= rows:
            break
        if e["id"] in pinned_ids:
            continue
        _event(t, e, pin=False)
        shown += 1
    if not events:
        t.append("no events" + (f" matching /{ui.event_filter}" if ui.event_filter else ""), style="grey50")
    t.rstrip()
    return t


def _event(t: Text, e: dict[str, Any], pin: bool) -> None:
    style = LEVEL_STYLE.get(e["level"], "")
    t.append("! " if pin else "  ", style=style)
    t.append(time.strftime("%H:%M:%S", time.localtime(e["ts"])) + " ")
    t.append(f"{e['level'][:4]:4} ", style=style)
    t.append(f"{e['kind']}: ", style="bold")
    msg = e["message"]
    t.append(inert(msg))
    t.append("\n")


def alerts_text(snap: Snapshot) -> Text | None:
    items = [(c.name, a) for c in snap.campaigns for a in c.alerts]
    if not items:
        return None
    t = Text(overflow="fold")
    for i, (name, a) in enumerate(items):
        t.append("ALERT ", style="bold white on red" if a.level == "error" else "bold black on yellow")
        t.append(f" {name}: {a.message}", style=LEVEL_STYLE.get(a.level, ""))
        if i < len(items) - 1:
            t.append("\n")
    return t


def footer(ui: UIState) -> Text:
    if ui.mode == "confirm_cancel":
        return Text("cancel this campaign? outstanding HITs are expired. y = yes, any other key = no", style="bold white on red")
    if ui.mode == "filter":
        return Text(f"filter events: /{ui.filter_draft}▏ (Enter apply, Esc clear)", style="bold")
    t = Text(no_wrap=True, overflow="ellipsis")
    if ui.message:
        t.append(ui.message + "  ", style=ui.message_style or "bold")
    keys = ("↑↓/jk select · p pause/resume · c cancel · e export · w workers · / filter · a seen · q quit" if ui.width >= 100
            else "jk select p pause c cancel e export w workers / filter a seen q quit")
    t.append(keys, style="grey62")
    return t


def workers_table(c: CampaignView, ui: UIState, rows: int) -> Table:
    key, heading, note = worker_figure(w.get("evidence") for w in ui.workers)
    t = Table(title=f"workers of {c.name} (w or Esc: back)", expand=True, show_edge=False, pad_edge=False,
              caption=note or None)
    t.add_column("worker", no_wrap=True)
    t.add_column("asg", justify="right")
    t.add_column(heading, justify="right")
    t.add_column("traps", justify="right")
    t.add_column("standing", no_wrap=True)
    t.add_column("reason", overflow="fold", ratio=1)
    for w in ui.workers[:max(rows, 1)]:
        e = w.get("evidence") or {}
        r = e.get(key)
        standing = WorkerStanding.BLOCKED if w["blocked"] else (WorkerStanding.EXCLUDED if w["excluded"] else WorkerStanding.OK)
        t.add_row(for_rich(w["worker"]), str(w["assignments"]), "" if r is None else f"{r:.2f}",
                  f"{e.get('traps_passed', 0)}/{e.get('traps_seen', 0)}" if e else "",
                  Text(standing, style="red" if standing != "ok" else "green"), for_rich(str(w.get("reason") or "")))
    return t


def build(snap: Snapshot, ui: UIState, width: int, height: int) -> RenderableType:
    """The whole screen for a terminal of `width` x `height`."""
    if not snap.campaigns:
        return Panel(Text(f"no campaign in {snap.store_url} yet; start one with `campaign run`. q quits."), title="campaign dashboard")
    ui.selected = min(max(ui.selected, 0), len(snap.campaigns) - 1)
    ui.width = width
    c = snap.campaigns[ui.selected]
    root = Layout()
    head = header(snap, width)
    alerts = alerts_text(snap)
    head_rows = _rows(head, width)
    alert_rows = min(_rows(alerts, width), 3) if alerts else 0
    clist = campaign_list(snap, ui, width, max_rows=max(3, height // 4))
    parts = [Layout(head, name="header", size=head_rows)]
    if alerts is not None:
        parts.append(Layout(alerts, name="alerts", size=alert_rows))
    parts.append(Layout(clist, name="campaigns", size=_rows(clist, width)))
    body = Layout(name="body")
    parts.append(body)
    parts.append(Layout(footer(ui), name="footer", size=1))
    root.split_column(*parts)
    fixed = head_rows + alert_rows + _rows(clist, width) + 1
    avail = max(height - fixed, 4)
    if ui.mode == "workers":
        body.update(workers_table(c, ui, avail - 3))
        return root
    wide = width >= WIDE
    left_w = width * 3 // 5 if wide else width
    summary = campaign_summary(c, left_w)
    if wide:
        stage_views = [(cv, st) for cv in snap.campaigns for st in cv.stages] if len(snap.campaigns) * 9 <= avail else [(c, st) for st in c.stages]
    else:
        stage_views = [(c, st) for st in c.stages]
    panels = [stage_panel(cv, st, left_w) for cv, st in stage_views]
    panel_rows = [_panel_rows(cv, st) for cv, st in stage_views]
    summary_rows = _rows(summary, left_w)
    if wide:
        left = Layout(name="left", ratio=3)
        right = Layout(name="right", ratio=2)
        body.split_row(left, right)
        left_parts = [Layout(summary, size=summary_rows)]
        for p, r in zip(panels, panel_rows):
            left_parts.append(Layout(p, size=r))
        left_parts.append(Layout(Text(" ")))
        left.split_column(*left_parts)
        ex_rows = min(len(c.exclusions) or 1, 6) + 2
        right.split_column(Layout(Panel(exclusions(c, ex_rows - 2, width - left_w), title="excluded / blocked (newest first)",
                                        title_align="left"), size=ex_rows),
                           Layout(Panel(event_lines(c, ui, avail - ex_rows - 2), title=_events_title(c, ui), title_align="left")))
        return root
    # narrow: summary, the stage panels that fit, exclusions, then events take the rest
    rows_left = avail - summary_rows
    body_parts = [Layout(summary, size=summary_rows)]
    for k, (p, r) in enumerate(zip(panels, panel_rows)):
        if rows_left - r < (3 if k == 0 else 5):  # the first panel goes before the event log; later ones only with room
            break
        body_parts.append(Layout(p, size=r))
        rows_left -= r
    ex_rows = min(len(c.exclusions), 2 if rows_left >= 9 else 1) if rows_left >= 6 else 0
    if ex_rows:
        body_parts.append(Layout(exclusions(c, ex_rows, width), size=ex_rows))
        rows_left -= ex_rows
    body_parts.append(Layout(Panel(event_lines(c, ui, max(rows_left - 2, 1)), title=_events_title(c, ui), title_align="left")))
    body.split_column(*body_parts)
    return root


def _events_title(c: CampaignView, ui: UIState) -> str:
    return f"events of {c.name}, newest first" + (f" (filter /{ui.event_filter})" if ui.event_filter else "")


def _panel_rows(c: CampaignView, st: StageView) -> int:
    return 2 + 3 + 1 + (st.earliest_auto_approval is not None) + (st.pairs is not None)


def _rows(t: Text | None, width: int) -> int:
    if t is None:
        return 0
    from rich.console import Console

    console = Console(width=width, file=_NULL, color_system=None)
    return max(1, len(console.render_lines(t, console.options.update(width=width), pad=False)))


class _Null:
    def write(self, _s: str) -> int:
        return 0

    def flush(self) -> None:
        pass


_NULL: Any = _Null()
