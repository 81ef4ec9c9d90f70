"""A stored review's per-worker evidence, kept as typed columns and read as `WorkerEvidence`.

A daemon keeps the parse of each stage's latest review (`steps.quality_pass.stage_review`) for every
campaign it runs; a `WorkerEvidence` object per worker with its own numbers and a dict entry took
~230 bytes a worker (~29,000 workers a daemon at 470,000 propositions). Here a worker costs a row of
columns (~50 bytes) and an index entry, and a `WorkerEvidence` is made when one is looked up; what is
looked up equals what the stored text holds (the same floats; None where the text has null).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from campaign.quality.evidence import WorkerEvidence


class EvidenceTable(Mapping[str, WorkerEvidence]):
    """Worker id -> `WorkerEvidence`, in the order of the stored text."""

    def __init__(self, stored: Mapping[str, Mapping[str, Any]]) -> None:
        n = len(stored)
        # ids interned: the same workers work in many of a daemon's campaigns
        self._index = {sys.intern(str(w)): i for i, w in enumerate(stored)}
        self._labels = np.zeros(n, dtype=np.int64)
        self._shared = np.zeros(n, dtype=np.int64)
        self._seen = np.zeros(n, dtype=np.int64)
        self._passed = np.zeros(n, dtype=np.int64)
        self._constant = np.zeros(n, dtype=bool)
        self._corr = np.zeros(n, dtype=np.float64)
        self._corr_known = np.zeros(n, dtype=bool)
        self._competence = np.zeros(n, dtype=np.float64)
        self._competence_known = np.zeros(n, dtype=bool)
        for i, e in enumerate(stored.values()):
            self._labels[i] = int(e["labels"])
            self._shared[i] = int(e["shared_items"])
            self._seen[i] = int(e["traps_seen"])
            self._passed[i] = int(e["traps_passed"])
            self._constant[i] = bool(e["constant"])
            corr, competence = e.get("correlation"), e.get("competence")
            if corr is not None:
                self._corr[i], self._corr_known[i] = float(corr), True
            if competence is not None:
                self._competence[i], self._competence_known[i] = float(competence), True

    def __getitem__(self, worker: str) -> WorkerEvidence:
        i = self._index[worker]
        return WorkerEvidence(worker=sys.intern(worker), labels=int(self._labels[i]), shared_items=int(self._shared[i]),
                              correlation=float(self._corr[i]) if self._corr_known[i] else None,
                              traps_seen=int(self._seen[i]), traps_passed=int(self._passed[i]),
                              constant=bool(self._constant[i]),
                              competence=float(self._competence[i]) if self._competence_known[i] else None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, worker: object) -> bool:
        return worker in self._index
