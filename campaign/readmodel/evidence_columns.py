"""Every worker's stored evidence figures of one campaign (`WorkerRow.evidence`), as typed columns.

A daemon keeps one `Reader` per campaign for its alerts, and each redraw reads every worker's evidence
text; only the texts that changed are parsed again. What is kept between redraws is the figures the
views read (agreement, labels, traps, exclusion; overall and per stage), one row per worker: 14 bytes
a worker plus 22 a worker and stage, where the parsed figures kept as objects were ~590 bytes a worker
(~29,000 workers a daemon at 470,000 propositions: 16 MiB). Rows are the worker indexes of the
campaign's `Arrivals`, so no second copy of the worker ids is kept either.

The figures read back here are the ones the stored text holds, with the text's own "missing": a
correlation that is absent or null is NaN, an exclusion flag that is absent or null is -1 (the
worker's row then decides), counts that are absent are 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

TOP = ""  # the slot of the figures at the top level of a worker's evidence (the primary stage's)


@dataclass(frozen=True)
class StageFigures:
    """One stage's evidence figures by worker index, as the views read them: `has` marks the workers
    with evidence for the stage (for the primary stage, every current worker: its figures also sit at
    the top level of the record); the other columns hold the text's figures where `has` is set."""

    has: np.ndarray  # bool
    correlation: np.ndarray  # float, NaN where absent or null
    labels: np.ndarray  # int64, 0 where absent
    traps_seen: np.ndarray  # int64
    traps_passed: np.ndarray  # int64
    excluded: np.ndarray  # int8: 1 / 0, -1 where absent or null


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _count(value: Any) -> int:
    got = _number(value)
    return int(got) if got is not None and math.isfinite(got) else 0


class EvidenceColumns:
    """The evidence figures of one campaign's workers by row (the worker's `Arrivals` index) and slot
    (the top level, then each stage named in any worker's evidence)."""

    GROWTH = 1.25

    def __init__(self) -> None:
        self.slots: dict[str, int] = {TOP: 0}
        self._hash = np.zeros(0, dtype=np.int64)  # the text's hash and length: parsed again only when they change
        self._len = np.zeros(0, dtype=np.int64)
        self._present = np.zeros((0, 1), dtype=bool)
        self._corr = np.zeros((0, 1), dtype=np.float64)
        self._labels = np.zeros((0, 1), dtype=np.int64)
        self._seen = np.zeros((0, 1), dtype=np.int64)
        self._passed = np.zeros((0, 1), dtype=np.int64)
        self._excl = np.zeros((0, 1), dtype=np.int8)

    def __len__(self) -> int:
        return len(self._hash)

    def _grow(self, rows: int, slots: int) -> None:
        have_rows, have_slots = self._present.shape
        if rows <= have_rows and slots <= have_slots:
            return
        new_rows = have_rows if rows <= have_rows else max(rows, int(have_rows * self.GROWTH) + 64)
        new_slots = max(slots, have_slots)

        def bigger(old: np.ndarray, fill: Any) -> np.ndarray:
            out = np.full((new_rows, new_slots), fill, dtype=old.dtype)
            out[:have_rows, :have_slots] = old
            return out

        self._present = bigger(self._present, False)
        self._corr = bigger(self._corr, np.nan)
        self._labels = bigger(self._labels, 0)
        self._seen = bigger(self._seen, 0)
        self._passed = bigger(self._passed, 0)
        self._excl = bigger(self._excl, -1)
        if new_rows > have_rows:
            self._hash = np.concatenate([self._hash, np.zeros(new_rows - have_rows, dtype=np.int64)])
            self._len = np.concatenate([self._len, np.full(new_rows - have_rows, -1, dtype=np.int64)])

    def update(self, rows: Iterable[tuple[int, str | None]]) -> None:
        """Take each (row, stored text); a text whose hash and length are the row's already is not
        parsed again (a shared 64-bit hash with the same length would keep the row's earlier figures
        until its text changes again)."""
        for row, raw in rows:
            self._grow(row + 1, len(self.slots))
            text = raw or ""
            sign = hash(text)
            if self._len[row] == len(text) and self._hash[row] == sign:
                continue
            self._hash[row], self._len[row] = sign, len(text)
            self._fill(row, text)

    def _fill(self, row: int, text: str) -> None:
        self._present[row, :] = False
        self._corr[row, :] = np.nan
        self._labels[row, :] = 0
        self._seen[row, :] = 0
        self._passed[row, :] = 0
        self._excl[row, :] = -1
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        stages = data.get("stages")
        parts: list[tuple[str, dict[str, Any]]] = [(TOP, data)]
        if isinstance(stages, dict):
            parts += [(str(k), v) for k, v in stages.items() if isinstance(v, dict)]
        for name, figures in parts:
            if name not in self.slots:
                self.slots[name] = len(self.slots)
                self._grow(len(self), len(self.slots))
            slot = self.slots[name]
            self._present[row, slot] = True
            corr = _number(figures.get("correlation"))
            self._corr[row, slot] = np.nan if corr is None else corr
            self._labels[row, slot] = _count(figures.get("labels"))
            self._seen[row, slot] = _count(figures.get("traps_seen"))
            self._passed[row, slot] = _count(figures.get("traps_passed"))
            excluded = figures.get("excluded")
            self._excl[row, slot] = -1 if excluded is None else int(bool(excluded))

    def stage(self, name: str, primary: bool, current: np.ndarray) -> StageFigures:
        """The figures of stage `name` for the workers marked in `current` (bool by row, as long as the
        campaign's worker list): the stage's own, or for the primary stage the top level's where the
        record has no entry for it (as a worker's record is read: `stages[name]`, else the top level)."""
        n = len(current)
        self._grow(n, len(self.slots))
        own = self.slots.get(name)
        has_own = self._present[:n, own] & current if own is not None else np.zeros(n, dtype=bool)
        has = current.copy() if primary else has_own
        take_top = has & ~has_own

        def pick(col: np.ndarray, fill: Any) -> np.ndarray:
            out = np.where(take_top, col[:n, 0], col[:n, own] if own is not None else fill)
            return np.where(has, out, fill)

        return StageFigures(has=has, correlation=pick(self._corr, np.nan), labels=pick(self._labels, 0),
                            traps_seen=pick(self._seen, 0), traps_passed=pick(self._passed, 0),
                            excluded=pick(self._excl, -1).astype(np.int8))
