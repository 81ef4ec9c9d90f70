"""The `campaign` command line's entry point (the console script and `python -m campaign`).

The commands themselves come from the modules in `campaign.commands.COMMAND_MODULES`, each adding its
parsers with `register(sub)`; this module only starts them.
"""

from __future__ import annotations

from collections.abc import Sequence

from campaign.commands import main as _main
from campaign.tools_cli import BENCHES, MARKET_COMMANDS

__all__ = ["BENCHES", "MARKET_COMMANDS", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    return _main(argv)
