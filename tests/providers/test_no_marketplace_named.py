"""The daemon and the pipeline steps never ask which marketplace a campaign is on: no marketplace name,
no `.marketplace` read and no Prolific special case in `campaign/daemon.py` or `campaign/steps/` (each
provider knows its own marketplace; the steps ask the marketplace's declared capabilities)."""

from __future__ import annotations

import ast
from pathlib import Path

from campaign import providers
from tests.support.paths import ROOT

ASKING = ("is_prolific", "PROLIFIC_MARKETPLACES", "SIMULATED_OK", "MARKETPLACES")


def _askings(path: Path, names: set[str]) -> list[str]:
    found = []
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        where = f"{shown}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Constant) and node.value in names:
            found.append(f"{where}: the name {node.value!r}")
        elif isinstance(node, ast.Attribute) and node.attr == "marketplace":
            found.append(f"{where}: reads .marketplace")
        elif isinstance(node, ast.Name | ast.alias) and (node.id if isinstance(node, ast.Name) else node.name) in ASKING:
            found.append(f"{where}: uses {ASKING}")
    return found


def test_the_daemon_and_the_steps_name_no_marketplace() -> None:
    names = set(providers.names())
    assert {"local", "mturk-sandbox", "mturk", "prolific", "prolific-local"} <= names
    files = [ROOT / "campaign" / "daemon.py", *sorted((ROOT / "campaign" / "steps").glob("*.py"))]
    found = [hit for f in files for hit in _askings(f, names)]
    assert found == [], "\n".join(found)


def test_the_check_finds_a_marketplace_asked_for(tmp_path: Path) -> None:
    f = tmp_path / "probe.py"
    f.write_text('from campaign.spec import SIMULATED_OK\n\ndef f(c):\n    return c.marketplace == "local"\n', encoding="utf-8")
    assert len(_askings(f, {"local"})) == 3
