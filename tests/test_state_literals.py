"""No status or key-value key is spelled out in `campaign/` except in `campaign/state.py`: the rest of the
code names them through its enums and `Keys` (found with ast: every string constant that is not a
docstring, and every literal part of an f-string)."""

from __future__ import annotations

import ast

from campaign import state
from tests.support.paths import ROOT

PACKAGE = ROOT / "campaign"
# Packages with a vocabulary of their own that merely shares some words: the built-in MTurk server and the
# Prolific emulator speak their marketplaces' statuses, the simulated crowd reads the worker site's pages.
# Migrations keep the words of their day.
OTHER_VOCABULARY = ("market", "prolific/emulator", "crowd", "bench", "migrations")

# What a row's status or state may be (a held row's kind and the operator's decision are words of the CLI
# and of review too: they are typed in state.py but not searched for).
STATES = (state.CampaignStatus, state.HitStatus, state.AssignmentStatus, state.SubmissionStatus, state.HeldStatus,
          state.BonusState, state.RepeatState, state.ReplaceState, state.LedgerKind)
STATUSES = {str(m) for e in STATES for m in e}
FIXED_KEYS = {v for k, v in vars(state.Keys).items() if k.isupper() and not v.endswith(":")}
KEY_PREFIXES = {v for k, v in vars(state.Keys).items() if k.isupper() and v.endswith(":")}


def _docstrings(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every status or key written as a literal in `source`."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    # Not states: field names of JSON and rows (`{"posted": n}`, `f["status"]`, `figures.get("held")`), event
    # kinds (`store.event(name, "planned", ...)`), command names (`add_parser("held")`) and table names.
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            skip.update(id(k) for k in node.keys if k is not None)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            skip.add(id(node.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            at = {"event": 1, "get": 0, "add_parser": 0}.get(node.func.attr)
            if at is not None and len(node.args) > at:
                skip.add(id(node.args[at]))
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__tablename__" for t in node.targets):
            skip.add(id(node.value))
    in_fstrings = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in skip:
            continue
        text = node.value
        if id(node) in in_fstrings:
            if any(text.endswith(p) or text == p.rstrip(":") for p in KEY_PREFIXES):
                found.append((node.lineno, text))
        elif text in STATUSES or text in FIXED_KEYS or any(text.startswith(p) for p in KEY_PREFIXES):
            found.append((node.lineno, text))
    return sorted(found)


def test_no_status_or_key_literal_outside_the_state_module():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "state.py" or rel.startswith(tuple(p + "/" for p in OTHER_VOCABULARY)):
            continue
        offenders += [f"{rel}:{line}: {text!r}" for line, text in literals(path.read_text(encoding="utf-8"))]
    assert offenders == [], "\n".join(offenders)


def test_the_scanner_finds_statuses_and_keys():
    src = 'def f(row, s):\n    """posted"""\n    row.status = "posted"\n    s.get_kv(f"stage_complete:{x}")\n    s.get_kv("budget_set")\n    print("a posted HIT")\n'
    assert literals(src) == [(3, "posted"), (4, "stage_complete:"), (5, "budget_set")]
