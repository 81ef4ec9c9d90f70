"""Task kinds and their registry: the one place that maps a stage's `kind` to the code that handles it.

`get(stage.kind)` answers every kind-specific question (planning, the HIT page, parsing, scores,
quality evidence, the simulated crowd's answer). The built-in kinds are registered here; a new kind
calls `register()` with an instance of its `TaskKind` subclass (see `campaign.tasks.kind`).
"""

from __future__ import annotations

from campaign.tasks import likert, nuggets, ranking
from campaign.tasks.kind import TaskKind

_KINDS: dict[str, TaskKind] = {}


def register(kind: TaskKind, *, replace: bool = False) -> TaskKind:
    """Make `kind` available under `kind.name`; registering a different kind under a taken name is an error."""
    old = _KINDS.get(kind.name)
    if old is not None and old is not kind and not replace:
        raise ValueError(f"task kind {kind.name!r} is already registered ({type(old).__name__})")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    _KINDS.pop(name, None)


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
    return tuple(_KINDS)


for _kind in (likert.LikertKind(), ranking.RankingKind(), nuggets.NuggetKind()):
    register(_kind)
