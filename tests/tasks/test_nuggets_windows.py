"""Balanced nugget windows: no HIT shorter than half a window unless its whole document is."""

import pytest

from campaign.tasks import nuggets


@pytest.mark.parametrize("n,sizes", [(1, [1]), (3, [3]), (7, [7]), (8, [4, 4]), (9, [5, 4]), (13, [7, 6]),
                                     (14, [7, 7]), (15, [5, 5, 5]), (22, [6, 6, 5, 5])])
def test_a_document_is_cut_into_balanced_windows(n, sizes):
    drafts = nuggets.plan([("d", f"d.s{i}") for i in range(n)], "nuggets", 7)
    assert [len(d.item_keys) for d in drafts] == sizes
    assert [k for d in drafts for k in d.item_keys] == [f"d.s{i}" for i in range(n)]


def test_no_window_under_four_unless_the_document_is_shorter():
    for n in range(1, 80):
        sizes = [len(d.item_keys) for d in nuggets.plan([("d", str(i)) for i in range(n)], "s", 7)]
        assert max(sizes) <= 7 and (min(sizes) >= 4 or sizes == [n]), (n, sizes)
