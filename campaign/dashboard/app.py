"""The interactive dashboard: reads the store every `interval` seconds, redraws on every key and resize.

Keys act through the same functions as the command line (`campaign.ops`), so `p` writes exactly the
intent `campaign pause NAME` writes; the daemon's acknowledgement (an `acknowledged` event, see
heartbeat.py) is shown when it arrives. Nothing here talks to a marketplace.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import select
import shutil
import signal
import sys
import termios
import time
import tty
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from sqlmodel import select as sql_select

from campaign.dashboard.screen import UIState, build
from campaign.readmodel import heartbeat
from campaign.readmodel.snapshot import CampaignView, Reader, Snapshot
from campaign.state import CampaignStatus
from campaign.store import Store, WorkerRow


class Dashboard:
    def __init__(self, store: Store, state_dir: Path, db: str | None, interval: float = 1.0) -> None:
        self.store, self.state_dir, self.db, self.interval = store, state_dir, db, interval
        self.reader = Reader(store, state_dir if db is None else None)
        self.ui = UIState()
        self.snap: Snapshot | None = None
        self.running = True

    # --- actions ---------------------------------------------------------------------------------------
    def _args(self, cmd: str, name: str, **extra: Any) -> argparse.Namespace:
        return argparse.Namespace(cmd=cmd, name=name, state=str(self.state_dir), db=self.db, **extra)

    def _call(self, fn: Any, args: argparse.Namespace) -> tuple[int, str]:
        """Run an ops function with its printing captured (the screen is ours); a failure is a message on
        the status line, not the end of the dashboard."""
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = int(fn(args))
        except Exception as exc:  # any failure of the action is shown; the console stays up
            return 1, f"{args.cmd} failed: {type(exc).__name__}: {exc}"
        text = (err.getvalue().strip() or out.getvalue().strip()).splitlines()
        return code, (text[-1] if text else "")

    def _say(self, message: str, style: str = "bold") -> None:
        self.ui.message, self.ui.message_style = message, style

    def selected(self) -> CampaignView | None:
        """The campaign the cursor is on, as the last snapshot saw it."""
        if not self.snap or not self.snap.campaigns:
            return None
        return self.snap.campaigns[min(self.ui.selected, len(self.snap.campaigns) - 1)]

    def current(self) -> str | None:
        sel = self.selected()
        return None if sel is None else sel.name

    def _last_event_id(self, name: str) -> int:
        from sqlmodel import func

        from campaign.store import EventRow

        with self.store.session() as s:
            return int(s.exec(sql_select(func.max(EventRow.id)).where(EventRow.campaign == name)).one() or 0)

    def toggle_pause(self) -> None:
        from campaign import ops

        sel = self.selected()
        if sel is None:
            return
        name = sel.name
        fn, cmd = (ops.resume, "resume") if sel.status == CampaignStatus.PAUSED else (ops.pause, "pause")
        code, text = self._call(fn, self._args(cmd, name))
        if code == 0:
            self.ui.waiting_ack[name] = self._last_event_id(name)
            self._say(f"{text} — written; waiting for the daemon's acknowledgement", "bold yellow")
        else:
            self._say(text or f"{cmd} refused", "bold red")

    def cancel(self) -> None:
        from campaign import ops

        name = self.current()
        if name is None:
            return
        code, text = self._call(ops.cancel, self._args("cancel", name))
        if code == 0:
            self.ui.waiting_ack[name] = self._last_event_id(name)
        self._say(text or "cancel refused", "bold yellow" if code == 0 else "bold red")

    def export(self) -> None:
        from campaign import ops

        name = self.current()
        if name is None:
            return
        out = self.state_dir / name / f"scores-{time.strftime('%Y%m%d-%H%M%S')}.csv"
        out.parent.mkdir(parents=True, exist_ok=True)
        code, text = self._call(ops.export, self._args("export", name, format="csv", out=str(out)))
        self._say(text if code == 0 else (text or "export failed"), "bold green" if code == 0 else "bold red")

    def load_workers(self) -> None:
        name = self.current()
        if name is None:
            return
        with self.store.session() as s:
            rows = s.exec(sql_select(WorkerRow).where(WorkerRow.campaign == name)).all()
        data = [{"worker": w.worker_id, "assignments": w.assignments, "excluded": w.excluded, "blocked": w.blocked,
                 "reason": w.reason, "evidence": json.loads(w.evidence) if w.evidence else None} for w in rows]
        data.sort(key=lambda d: (not d["blocked"], not d["excluded"], d["worker"]))
        self.ui.workers = data

    def check_ack(self) -> None:
        """Show the daemon's acknowledgement of an intent once its event is in the store."""
        if not self.snap:
            return
        for c in self.snap.campaigns:
            since = self.ui.waiting_ack.get(c.name)
            if since is None:
                continue
            ack = next((e for e in c.events if e["id"] > since and e["kind"] in (heartbeat.ACK_KIND, CampaignStatus.CANCELLED)), None)
            if ack is not None:
                self._say(f"{c.name}: acknowledged by the daemon: {ack['message']}", "bold green")
                del self.ui.waiting_ack[c.name]
            elif not c.live.live:
                self._say(f"{c.name}: intent written; no daemon is running to carry it out", "bold red")

    # --- keys ------------------------------------------------------------------------------------------
    def key(self, k: str) -> None:
        ui = self.ui
        if ui.mode == "confirm_cancel":
            ui.mode = "main"
            if k in ("y", "Y"):
                self.cancel()
            else:
                self._say("not cancelled")
            return
        if ui.mode == "filter":
            if k in ("\r", "\n"):
                ui.event_filter, ui.mode = ui.filter_draft, "main"
            elif k == "\x1b":
                ui.event_filter = ui.filter_draft = ""
                ui.mode = "main"
            elif k in ("\x7f", "\b"):
                ui.filter_draft = ui.filter_draft[:-1]
            elif len(k) == 1 and k.isprintable():
                ui.filter_draft += k
            return
        n = len(self.snap.campaigns) if self.snap else 0
        if k in ("q", "Q", "\x03"):
            self.running = False
        elif k in ("j", "DOWN"):
            ui.selected = (ui.selected + 1) % max(n, 1)
            if ui.mode == "workers":
                self.load_workers()
        elif k in ("k", "UP"):
            ui.selected = (ui.selected - 1) % max(n, 1)
            if ui.mode == "workers":
                self.load_workers()
        elif k == "p":
            self.toggle_pause()
        elif k == "c":
            sel = self.selected()
            if sel is not None and sel.status in (CampaignStatus.RUNNING, CampaignStatus.PAUSED):
                ui.mode = "confirm_cancel"
            elif sel is not None:  # asking first only to refuse after a "y" would waste the next key pressed
                self._say(f"campaign: {sel.name} is {sel.status}; cannot cancel it", "bold red")
        elif k == "e":
            self.export()
        elif k == "w":
            if ui.mode == "workers":
                ui.mode = "main"
            else:
                self.load_workers()
                ui.mode = "workers"
        elif k == "\x1b":
            ui.mode = "main"
        elif k == "/":
            ui.mode, ui.filter_draft = "filter", ui.event_filter
        elif k == "a":
            if self.snap:
                ui.seen_event_id = max((e["id"] for c in self.snap.campaigns for e in c.events), default=ui.seen_event_id)
            self._say("warnings and errors marked seen")

    # --- loop ------------------------------------------------------------------------------------------
    def run(self) -> int:
        fd = sys.stdin.fileno()
        out = sys.stdout
        console = Console(file=out, force_terminal=True)
        old = termios.tcgetattr(fd) if os.isatty(fd) else None
        resized = [True]

        def on_winch(_s: int, _f: Any) -> None:
            resized[0] = True

        old_winch = signal.signal(signal.SIGWINCH, on_winch)
        try:
            if old is not None:
                tty.setcbreak(fd)
            size = _size(out)
            console.size = size
            self.snap = self.reader.snapshot()
            with Live(build(self.snap, self.ui, *size), console=console, screen=True, auto_refresh=False,
                      transient=False) as live:
                next_read = time.monotonic() + self.interval
                pending = ""
                while self.running:
                    timeout = max(0.0, min(next_read - time.monotonic(), 0.25))
                    r, _, _ = select.select([fd], [], [], timeout)
                    dirty = False
                    if r:
                        data = os.read(fd, 64).decode("utf-8", "replace")
                        if not data:  # stdin closed
                            break
                        pending += data
                        keys, pending = split_keys(pending)
                        for k in keys:
                            self.key(k)
                        dirty = True
                    if resized[0] or _size(out) != size:
                        resized[0] = False
                        size = _size(out)
                        console.size = size
                        dirty = True
                    if time.monotonic() >= next_read:
                        self.snap = self.reader.snapshot()
                        self.check_ack()
                        next_read = time.monotonic() + self.interval
                        dirty = True
                    if dirty and self.running:
                        live.update(build(self.snap, self.ui, *size), refresh=True)
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGWINCH, old_winch)
            if old is not None:
                termios.tcsetattr(fd, termios.TCSADRAIN, old)
        return 0


def _size(out: Any) -> tuple[int, int]:
    """The terminal's size from the terminal itself (so a resize is seen even when COLUMNS is set);
    COLUMNS/LINES or 80x24 only when the terminal does not say."""
    try:
        s = os.get_terminal_size(out.fileno())
        cols, rows = s.columns, s.lines
    except (OSError, ValueError):
        cols = rows = 0
    if not cols or not rows:
        fallback = shutil.get_terminal_size((80, 24))
        cols, rows = cols or fallback.columns, rows or fallback.lines
    return max(cols, 20), max(rows, 8)


ARROWS = {"\x1b[A": "UP", "\x1b[B": "DOWN", "\x1bOA": "UP", "\x1bOB": "DOWN", "\x1b[C": "RIGHT", "\x1b[D": "LEFT"}


def split_keys(buf: str) -> tuple[list[str], str]:
    """Split raw terminal input into keys (arrow escape sequences become UP/DOWN); returns the keys and
    an incomplete escape sequence to keep for the next read."""
    keys: list[str] = []
    i = 0
    while i < len(buf):
        if buf[i] == "\x1b":
            seq = buf[i:i + 3]
            if seq in ARROWS:
                keys.append(ARROWS[seq])
                i += 3
                continue
            if len(seq) < 3 and len(buf) - i < 3 and seq in ("\x1b", "\x1b[", "\x1bO"):
                if len(seq) == 1:  # a lone Esc: the user pressed Esc
                    keys.append("\x1b")
                    i += 1
                    continue
                return keys, buf[i:]
        keys.append(buf[i])
        i += 1
    return keys, ""


def run_dashboard(state: str, db: str | None, interval: float = 1.0) -> int:
    """Open the store read-only-in-spirit (it must already exist) and run the dashboard."""
    from campaign.dashboard.stores import open_existing

    store = open_existing(state, db, "dashboard")
    if store is None:
        return 2
    if not sys.stdin.isatty() or not sys.stdout.isatty():
        print("campaign dashboard: needs a terminal; use `campaign status` or `campaign status --json` in scripts", file=sys.stderr)
        return 2
    try:
        return Dashboard(store, Path(state), db, interval).run()
    finally:
        store.close()
