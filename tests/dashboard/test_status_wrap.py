"""`campaign status` wraps long event messages instead of cutting them at 120 characters."""

from __future__ import annotations

import io

from rich.console import Console

from campaign.dashboard.view import build
from campaign.readmodel.figures import campaign_figures
from tests.dashboard.test_status import make_store


def test_long_event_messages_are_wrapped_whole(tmp_path):
    store = make_store(tmp_path)
    message = ("budget alert: 85% of the budget committed ($34.16 of $40.00); raise it with `campaign budget c1 --set "
               "AMOUNT` before the daemon stops posting, or let the campaign end at budget_exhausted as it stands now")
    assert len(message) > 150
    store.event("c1", "alert", message)
    figures = campaign_figures(store, "c1")
    store.close()
    for width in (80, 160):
        console = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)
        console.print(build({"campaigns": [figures]}, width))
        text = " ".join(console.file.getvalue().replace("│", " ").replace("┃", " ").split())
        assert "as it stands now" in text and "let the campaign end" in text, text
