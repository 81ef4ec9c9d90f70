"""Task kinds: each groups items into HITs, renders its HTML, parses answers into judgments.

`render_hit` and `parse_answer` give the daemon one way to call any kind, with the stage's parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from campaign.tasks.base import Judgment, ShownItem

if TYPE_CHECKING:
    from campaign.spec import Stage


def kind_module(kind: str) -> ModuleType:
    if kind == "likert":
        from campaign.tasks import likert as m
    elif kind == "ranking":
        from campaign.tasks import ranking as m
    elif kind == "nuggets":
        from campaign.tasks import nuggets as m
    else:
        raise KeyError(f"task kind {kind!r} is not available")
    return m


def render_hit(stage: Stage, items: Sequence[ShownItem], topic: str) -> str:
    m = kind_module(stage.kind)
    if stage.kind == "nuggets":
        return m.render(items, topic, stage.title, min_tokens=stage.min_nugget_tokens)
    return m.render(items, topic, stage.title)


def parse_answer(stage: Stage, fields: Sequence[tuple[str, str]], items: Sequence[ShownItem]) -> list[Judgment]:
    m = kind_module(stage.kind)
    keys = [i.key for i in items]
    if stage.kind == "nuggets":
        return m.parse(fields, keys, [i.text for i in items], min_tokens=stage.min_nugget_tokens, require_verb=stage.require_verb)
    return m.parse(fields, keys)
