import pytest

from campaign.quality.evidence import Label, TrapResult, gather, meta_worker_agreement, pearson, worker_rest


def lab(item, worker, value):
    return Label(item=item, worker=worker, assignment=f"{worker}-{item}", value=value)


def test_pearson_by_hand():
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert pearson([2, 2, 2], [1, 2, 3]) is None


def test_worker_rest_uses_the_mean_of_the_others_and_min_shared():
    labels = []
    for i, (a, b, c) in enumerate([(1, 1, 5), (2, 2, 4), (3, 3, 3), (4, 4, 2), (5, 5, 1)]):
        labels += [lab(f"i{i}", "A", a), lab(f"i{i}", "B", b), lab(f"i{i}", "C", c)]
    r = worker_rest(labels, min_shared=5)
    # A against mean(B, C) = 3 on every item: no variance on the rest side -> counts as 0
    assert r["A"] == (0.0, 5)
    # C against mean(A, B) = 1..5 while C runs 5..1
    assert r["C"][0] == pytest.approx(-1.0)
    assert worker_rest(labels, min_shared=6)["C"] == (None, 5)


def test_meta_workers_sorted_per_item():
    labels = []
    for i in range(6):
        for w in range(5):
            labels.append(lab(f"i{i}", f"w{w}", float(i % 3 + (w % 2))))
    assert meta_worker_agreement(labels, k=5) == pytest.approx(1.0, abs=1e-9) or meta_worker_agreement(labels, k=5) > 0.9
    assert meta_worker_agreement(labels[:10], k=5) is None


def test_gather_counts_traps_and_constancy():
    labels = [lab(f"i{i}", "S", 3.0) for i in range(6)] + [lab(f"i{i}", "G", float(i % 5 + 1)) for i in range(6)]
    traps = [TrapResult("S", "a1", "trap:x", 5.0, False), TrapResult("S", "a2", "trap:x", 4.0, False),
             TrapResult("G", "a3", "trap:x", 1.0, True)]
    ev = gather(labels, traps, min_shared=5)
    assert ev["S"].constant and not ev["G"].constant
    assert (ev["S"].traps_seen, ev["S"].traps_passed, ev["G"].trap_pass_rate) == (2, 0, 1.0)
