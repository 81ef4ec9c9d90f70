"""Task kinds: each groups items into HITs, renders its HTML, parses answers, aggregates judgments."""

from __future__ import annotations

from types import ModuleType


def kind_module(kind: str) -> ModuleType:
    if kind == "likert":
        from campaign.tasks import likert

        return likert
    raise KeyError(f"task kind {kind!r} is not available")
