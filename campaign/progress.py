"""What `campaign run` shows while it works: a live Rich view on a terminal, plain log lines otherwise."""

from __future__ import annotations

import time
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import TaskID

from campaign.money import shown
from campaign.readmodel.figures import campaign_figures
from campaign.state import CampaignStatus


def _line(f: dict[str, Any]) -> str:
    a, m, h, cur = f["assignments"], f["money"], f["hits"], f["currency"]
    return (f"{f['name']}: {f['status']}; HITs {h['posted']}/{h['planned']} posted, {h['completed']} done; "
            f"answers {a['submitted']}/{a['expected']} ({a['approved']} approved, {a['rejected']} rejected); "
            f"spent {shown(m['spent'], cur)}, reserved {shown(m['reserved'], cur)} of {shown(m['budget'], cur)}"
            # paused by a Prolific pilot: its summary, for the researcher to read before `campaign resume`
            + (f"\n{f['name']}: {f['pilot']}" if f["status"] == CampaignStatus.PAUSED and f.get("pilot") else ""))


class PlainProgress:
    """One line per campaign every few seconds, at once when a campaign's status changes, and the
    latest figures at the end, so the last line printed for a campaign is what `status` says."""

    def __init__(self, stream: IO[str], every: float = 3.0) -> None:
        self.stream, self.every, self._last = stream, every, 0.0
        self._printed: dict[str, str] = {}  # campaign -> last line printed
        self._latest: dict[str, str] = {}  # campaign -> line from the latest figures
        self._status: dict[str, str] = {}  # campaign -> status in the last printed figures

    def __call__(self, rt: Any) -> None:
        now = time.monotonic()
        due = now - self._last >= self.every
        changed = False
        for ctx in rt.contexts:
            f = campaign_figures(rt.store, ctx.name)
            self._latest[ctx.name] = _line(f)
            changed |= self._status.get(ctx.name) != f["status"]
            self._status[ctx.name] = f["status"]
        if due or changed:
            self._last = now
            self._flush(only_new=False)

    def _flush(self, only_new: bool) -> None:
        for name, line in self._latest.items():
            if only_new and self._printed.get(name) == line:
                continue
            print(line, file=self.stream, flush=True)
            self._printed[name] = line

    def close(self) -> None:
        self._flush(only_new=True)


class LiveProgress:
    """A Rich progress bar per campaign, redrawn from the store."""

    def __init__(self, stream: IO[str]) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(file=stream)
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                 TextColumn("{task.fields[money]}"), TimeElapsedColumn(), console=self.console)
        self.tasks: dict[str, TaskID] = {}
        self.progress.start()

    def __call__(self, rt: Any) -> None:
        for ctx in rt.contexts:
            f = campaign_figures(rt.store, ctx.name)
            a, m = f["assignments"], f["money"]
            cur = f["currency"]
            money = f"{shown(m['spent'], cur)} spent, {shown(m['reserved'], cur)} reserved / {shown(m['budget'], cur)}"
            if ctx.name not in self.tasks:
                self.tasks[ctx.name] = self.progress.add_task(ctx.name, total=max(a["expected"], 1), money=money)
            self.progress.update(self.tasks[ctx.name], total=max(a["expected"], 1), completed=a["approved"] + a["rejected"],
                                 money=money, description=f"{ctx.name} [{f['status']}]")

    def close(self) -> None:
        self.progress.stop()


def make_progress(stream: IO[str]) -> PlainProgress | LiveProgress:
    return LiveProgress(stream) if stream.isatty() else PlainProgress(stream)
