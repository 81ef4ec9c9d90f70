"""Writing a nugget stage's gold nuggets on their own (the finish step writes them through the nugget
kind's export; this is for tools that hold a list of gold nuggets already)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from campaign.outfile import atomic_write
from campaign.tasks.nuggets import gold_jsonl


def write_gold(out_dir: Path, gold: Sequence[Mapping[str, object]]) -> Path:
    path = out_dir / "gold_nuggets.jsonl"
    atomic_write(path, gold_jsonl(gold))
    return path
