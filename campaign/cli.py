"""The `campaign` command line's entry point (the console script and `python -m campaign`).

The commands themselves come from the modules in `campaign.commands.COMMAND_MODULES`, each adding its
parsers with `register(sub)`; this module only starts them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from campaign.tools_cli import BENCHES, MARKET_COMMANDS

__all__ = ["BENCHES", "MARKET_COMMANDS", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    from campaign.runlock import refuse_early

    # a second daemon on a state directory is refused before the parser imports the package
    refusal = refuse_early(sys.argv[1:] if argv is None else argv)
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return 2
    from campaign.commands import main as _main

    return _main(argv)
