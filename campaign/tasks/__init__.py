"""Task kinds and their registry: the one place that maps a stage's `kind` to the code that handles it.

`get(stage.kind)` answers every kind-specific question (the stage's type in a spec, planning, the HIT
page, parsing, scores, quality evidence, the simulated crowd's answer). The built-in kinds are registered
here; a new kind calls `register()` with an instance of its `TaskKind` subclass (see
`campaign.tasks.kind`), which brings its stage type along. `registered()` does the same for the length
of a `with` block (a test's own kind), and puts back whatever was there before.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import is_dataclass

from campaign.stage import Stage
from campaign.tasks import likert, nuggets, ranking
from campaign.tasks.kind import TaskKind

_KINDS: dict[str, TaskKind] = {}


def register(kind: TaskKind, *, replace: bool = False) -> TaskKind:
    """Make `kind` available under `kind.name`; registering a different kind under a taken name is an error
    unless `replace`. Its `stage_type` must be a dataclass subclassing `campaign.stage.Stage`."""
    cls = kind.stage_type
    if not (isinstance(cls, type) and issubclass(cls, Stage) and is_dataclass(cls)):
        raise TypeError(f"stage type of task kind {kind.name!r} must be a dataclass subclassing campaign.stage.Stage, got {cls!r}")
    old = _KINDS.get(kind.name)
    if old is not None and old is not kind and not replace:
        raise ValueError(f"task kind {kind.name!r} is already registered ({type(old).__name__})")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    _KINDS.pop(name, None)


@contextmanager
def registered(kind: TaskKind, *, replace: bool = False) -> Iterator[TaskKind]:
    """`kind` registered inside the block only; the kind it replaced (if any) is back afterwards."""
    before = _KINDS.get(kind.name)
    register(kind, replace=replace)
    try:
        yield kind
    finally:
        if before is None:
            _KINDS.pop(kind.name, None)
        else:
            _KINDS[kind.name] = before


def get(name: str) -> TaskKind:
    try:
        return _KINDS[name]
    except KeyError:
        raise KeyError(f"task kind {name!r} is not registered; known kinds: {', '.join(sorted(_KINDS))}") from None


def for_page(task: str | None) -> TaskKind:
    """The kind of a HIT page, from its form's `data-task` (None: the kind whose pages are untagged)."""
    if task is not None:
        return get(task)
    untagged = [k for k in _KINDS.values() if k.untagged_page]
    if len(untagged) != 1:
        raise KeyError(f"a HIT page without data-task, and {len(untagged)} kinds claim untagged pages")
    return untagged[0]


def names() -> tuple[str, ...]:
    """The registered kinds, in registration order."""
    return tuple(_KINDS)


def stage_types() -> Mapping[str, type[Stage]]:
    """Each registered kind's stage type, in registration order: what the spec reads stages into."""
    return {name: kind.stage_type for name, kind in _KINDS.items()}


for _kind in (likert.LikertKind(), ranking.RankingKind(), nuggets.NuggetKind()):
    register(_kind)
