"""What a Reader kept for a run holds for the alerts of every campaign a daemon runs: per answer
(`Arrivals`, one typed column per figure, grown in place) and per worker (`EvidenceColumns`, tests/readmodel/test_evidence_columns.py)."""

from __future__ import annotations

import numpy as np
import pytest

from campaign.readmodel.snapshot import Arrivals


def _fill(a: Arrivals, chunks: list[int]) -> None:
    k = 0
    for size in chunks:
        a._append([float(k + i) for i in range(size)], [(k + i) % 3 for i in range(size)], [(k + i) % 7 for i in range(size)])
        k += size


def test_answers_added_in_pieces_read_as_if_added_at_once() -> None:
    once, pieces = Arrivals(), Arrivals()
    _fill(once, [5000])
    _fill(pieces, [1, 999, 0, 1500, 2500])
    assert once.count == pieces.count == 5000
    for a, b in zip(once.arrays(), pieces.arrays()):
        assert a.tolist() == b.tolist()
    t, s, w = pieces.arrays()
    assert t[4999] == 4999.0 and s[4999] == 4999 % 3 and w[4999] == 4999 % 7


def test_columns_grow_by_a_quarter_not_by_doubling() -> None:
    a = Arrivals()
    for _ in range(200):
        _fill(a, [1000])
    assert a.count == 200_000
    assert len(a._t) <= a.count * Arrivals.GROWTH + 1024
    held = sum(col.nbytes for col in (a._t, a._s, a._w))
    assert held / a.count <= 14 * Arrivals.GROWTH + 1


def test_the_arrays_handed_out_are_read_only_views_that_stay_valid() -> None:
    a = Arrivals()
    _fill(a, [10])
    t, _, _ = a.arrays()
    with pytest.raises(ValueError):
        t[0] = 99.0
    _fill(a, [5000])  # grows: the view handed out earlier still reads what it read
    assert t.tolist() == [float(i) for i in range(10)]
    assert np.shares_memory(a.arrays()[0], a._t)
