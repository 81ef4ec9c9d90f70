"""A transient progress bar on standard error for commands that compute for a while before they print
(`campaign simulate`, `campaign aggregate`): shown only on a terminal, so scripts and pipes get their
output unchanged and nothing on standard error."""

from __future__ import annotations

import sys
from typing import IO


class StepBar:
    """"LABEL [bar] done/total elapsed" and what is being done, redrawn on each `update`; gone once
    `close` is called. Why a class of its own: the commands that need it compute in a library function
    that reports through a plain callback, and only the command decides how that is shown."""

    def __init__(self, label: str, stream: IO[str] | None = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TextColumn("{task.description}"), transient=True,
                                 console=Console(file=stream or sys.stderr))
        self.task = self.progress.add_task("", total=None)
        self.progress.start()

    def update(self, done: int, total: int, doing: str = "") -> None:
        self.progress.update(self.task, completed=done, total=total, description=doing)

    def close(self) -> None:
        self.progress.stop()


def bar_on_terminal(label: str) -> StepBar | None:
    """A `StepBar` when standard error is a terminal, else None (nothing is shown)."""
    return StepBar(label) if sys.stderr.isatty() else None
