"""What `campaign run` shows while it works: a live Rich view on a terminal, plain log lines otherwise."""

from __future__ import annotations

import time
from typing import IO, Any

from campaign.dashboard.figures import campaign_figures


def _line(f: dict[str, Any]) -> str:
    a, m, h = f["assignments"], f["money"], f["hits"]
    return (f"{f['name']}: {f['status']}; HITs {h['posted']}/{h['planned']} posted, {h['completed']} done; "
            f"answers {a['submitted']}/{a['expected']} ({a['approved']} approved, {a['rejected']} rejected); "
            f"spent ${m['spent']}, reserved ${m['reserved']} of ${m['budget']}")


class PlainProgress:
    """One line per campaign every few seconds (and at the end), for logs and pipes."""

    def __init__(self, stream: IO[str], every: float = 3.0) -> None:
        self.stream, self.every, self._last = stream, every, 0.0

    def __call__(self, rt) -> None:
        now = time.monotonic()
        if now - self._last < self.every:
            return
        self._last = now
        for ctx in rt.contexts:
            print(_line(campaign_figures(rt.store, ctx.name)), file=self.stream, flush=True)

    def close(self) -> None:
        self._last = 0.0


class LiveProgress:
    """A Rich progress bar per campaign, redrawn from the store."""

    def __init__(self, stream: IO[str]) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(file=stream)
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                 TextColumn("{task.fields[money]}"), TimeElapsedColumn(), console=self.console)
        self.tasks: dict[str, int] = {}
        self.progress.start()

    def __call__(self, rt) -> None:
        for ctx in rt.contexts:
            f = campaign_figures(rt.store, ctx.name)
            a, m = f["assignments"], f["money"]
            money = f"${m['spent']} spent, ${m['reserved']} reserved / ${m['budget']}"
            if ctx.name not in self.tasks:
                self.tasks[ctx.name] = self.progress.add_task(ctx.name, total=max(a["expected"], 1), money=money)
            self.progress.update(self.tasks[ctx.name], total=max(a["expected"], 1), completed=a["approved"] + a["rejected"],
                                 money=money, description=f"{ctx.name} [{f['status']}]")

    def close(self) -> None:
        self.progress.stop()


def make_progress(stream: IO[str]):
    return LiveProgress(stream) if stream.isatty() else PlainProgress(stream)
