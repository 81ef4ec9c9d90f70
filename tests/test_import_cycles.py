"""The shape of `campaign/`: a declared order of layers, from the command line down to money, clocks and
random numbers, that every import follows downwards (or within its own layer); no import cycle; and
production code never imports the simulated crowd. Found statically with ast over every module: imports
inside functions count too (a deferred import only hides a dependency, it does not remove it); imports
under `if TYPE_CHECKING:` do not (they never run)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import ROOT

PACKAGE = ROOT / "campaign"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def module_imports(path: Path, modules: set[str], top_level_only: bool = False) -> set[str]:
    """Modules of `campaign` a module imports anywhere (at the top or inside functions), except for type checking."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _is_type_checking(node)
                   for stmt in node.body for n in ast.walk(stmt)}
    in_functions = {id(n) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    for stmt in node.body for n in ast.walk(stmt)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only or (top_level_only and id(node) in in_functions):
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # `from package import module`
    return {m for m in found if m in modules and m != name}


def graph(top_level_only: bool = False) -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): module_imports(p, modules, top_level_only) for p in paths}


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(g.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = dfs(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(g):
        if n not in state:
            found = dfs(n)
            if found:
                return found
    return None


def cycles(g: dict[str, set[str]]) -> set[frozenset[str]]:
    """Every group of modules that import each other in a circle (strongly connected, more than one module)."""
    out: set[frozenset[str]] = set()
    reach: dict[str, set[str]] = {}

    def reachable(n: str) -> set[str]:
        if n not in reach:
            seen: set[str] = set()
            todo = list(g.get(n, ()))
            while todo:
                m = todo.pop()
                if m not in seen:
                    seen.add(m)
                    todo.extend(g.get(m, ()))
            reach[n] = seen
        return reach[n]

    for n in g:
        group = frozenset(m for m in reachable(n) if n in reachable(m)) | {n}
        if len(group) > 1 or n in reachable(n):
            out.add(group)
    return out


# Top to bottom. A module belongs to the layer of its longest matching prefix (a module or a package);
# it may import modules of its own layer and of the layers below, never of one above.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("command line", ("campaign.__main__", "campaign.cli", "campaign.commands", "campaign.tools_cli", "campaign.held_cli",
                      "campaign.init", "campaign.answers.cli", "campaign.aggregate.cli", "campaign.evaluate.cli",
                      "campaign.dashboard.cli", "campaign.crowd.cli", "campaign.migrations.__main__",
                      "campaign.simulate_cli", "campaign.prolific.serve")),
    ("benchmarks", ("campaign.bench",)),
    # what starts a run, the simulated crowd included: the only production code that may import the crowd
    ("run wiring", ("campaign.daemon", "campaign.progress", "campaign.providers", "campaign.simulate")),
    ("simulated crowd", ("campaign.crowd",)),
    ("views and operator commands", ("campaign.dashboard", "campaign.report", "campaign.report_svg", "campaign.ops",
                                     "campaign.answers", "campaign.preview", "campaign.estimate", "campaign.page_size",
                                     "campaign.evaluate")),
    ("pipeline", ("campaign.steps",)),
    ("read side", ("campaign.readmodel", "campaign.held", "campaign.pay")),
    ("marketplace adapters", ("campaign.marketplaces", "campaign.prolific")),
    ("servers", ("campaign.market", "campaign.prolific.emulator", "campaign.web")),
    ("spec", ("campaign.spec", "campaign.inputs", "campaign.sentences", "campaign.datasets")),
    ("task kinds", ("campaign.tasks",)),
    ("pure rules", ("campaign.stage", "campaign.simulation", "campaign.quality", "campaign.aggregate", "campaign.plan",
                    "campaign.metrics", "campaign.prolific.study", "campaign.prolific.verdict", "campaign.prolific.gate",
                    "campaign.prolific.filters", "campaign.prolific.checks")),
    ("store", ("campaign.store", "campaign.ledger", "campaign.leases", "campaign.migrations")),
    ("foundations", ("campaign.money", "campaign.clock", "campaign.rng", "campaign.state", "campaign.crash",
                     "campaign.credentials", "campaign.answer_xml", "campaign.filemodes", "campaign.outfile", "campaign.argtypes", "campaign.progress_bar", "campaign.paths", "campaign.jsonout",
                     "campaign.untrusted", "campaign.runlock", "campaign.child_process", "campaign.ids", "campaign.timeline",
                     "campaign.allocator")),
)
ROOT_PACKAGE = "campaign"  # its __init__ holds the version only: any layer may import it


def layer_of(module: str, layers: tuple[tuple[str, tuple[str, ...]], ...] = LAYERS) -> int | None:
    """The index of the layer `module` belongs to (0 is the top), or None if no layer names it."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def upward_imports(g: dict[str, set[str]], layers: tuple[tuple[str, tuple[str, ...]], ...] = LAYERS) -> list[str]:
    """Every import that goes up the layer order, as `module (layer) -> module (layer)`."""
    out = []
    for module, deps in sorted(g.items()):
        mine = layer_of(module, layers)
        for dep in sorted(deps - {ROOT_PACKAGE}):
            theirs = layer_of(dep, layers)
            if mine is not None and theirs is not None and theirs < mine:
                out.append(f"{module} ({layers[mine][0]}) -> {dep} ({layers[theirs][0]})")
    return out


def test_every_module_has_a_layer():
    assert sorted(m for m in graph() if m != ROOT_PACKAGE and layer_of(m) is None) == []


def test_no_import_goes_up_the_layers():
    found = upward_imports(graph())
    assert found == [], "\n".join(found)


def test_the_layer_check_finds_an_import_going_up():
    layers = (("top", ("p.top",)), ("middle", ("p.mid", "p.top.low")), ("bottom", ("p.bottom",)))
    g = {"p.top.a": {"p.mid.b"}, "p.mid.b": {"p.bottom.c", "p.top.a"}, "p.top.low.d": {"p.top.a"}, "p.bottom.c": set()}
    assert layer_of("p.top.low.d", layers) == 1 and layer_of("p.elsewhere", layers) is None
    assert upward_imports(g, layers) == ["p.mid.b (middle) -> p.top.a (top)", "p.top.low.d (middle) -> p.top.a (top)"]


def test_there_is_no_import_cycle_in_campaign():
    found = cycles(graph())
    assert found == set(), " ; ".join(" <-> ".join(sorted(c)) for c in found)


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}) == {frozenset("abc"), frozenset("e")}


def test_production_code_never_imports_the_simulated_crowd():
    """At import time, that is: a kind's `simulate` hook and the daemon starting a simulation reach the
    crowd's models only when a simulated crowd actually runs."""
    g = graph(top_level_only=True)
    offenders = sorted(m for m, deps in g.items()
                       if not m.startswith(("campaign.crowd", "campaign.bench")) and any(d.startswith("campaign.crowd") for d in deps))
    assert offenders == []


def test_task_kinds_know_the_simulated_crowd_only_through_neutral_protocols():
    """Not even for type checking: a kind's `simulate` is typed with `campaign.simulation`'s protocols."""
    named = []
    for path in sorted((PACKAGE / "tasks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("campaign.crowd"):
                named.append(f"{path.name}:{node.lineno}")
            elif isinstance(node, ast.Import) and any(a.name.startswith("campaign.crowd") for a in node.names):
                named.append(f"{path.name}:{node.lineno}")
    assert named == []
