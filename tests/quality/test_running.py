"""The running evidence equals `gather` over the same labels, however they are split and ordered."""

from __future__ import annotations

import random

import numpy as np
import pytest

from campaign.quality.evidence import Label, TrapResult, gather
from campaign.quality.running import RestoreMismatch, RetiredItem, RetiredItems, RunningEvidence


def crowd_labels(rng: random.Random, items: int, per_item: int, workers: int, spammers: int,
                 values: list[float]) -> list[Label]:
    """Honest workers rate near each item's truth, spammers at random; now and then a worker rates an
    item twice (a repeat HIT)."""
    out = []
    for i in range(items):
        truth = rng.choice(values)
        for k in range(per_item):
            w = rng.randrange(workers)
            v = rng.choice(values) if w < spammers else min(values, key=lambda x: abs(x - truth - rng.gauss(0, 0.7)))
            out.append(Label(item=f"i{i}", worker=f"W{w}", assignment=f"a{i}-{k}", value=v))
    return out


def assert_same(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for w, e in want.items():
        g = got[w]
        assert (g.labels, g.shared_items, g.traps_seen, g.traps_passed, g.constant) == \
            (e.labels, e.shared_items, e.traps_seen, e.traps_passed, e.constant), w
        if e.correlation is None:
            assert g.correlation is None, w
        else:
            assert g.correlation is not None and abs(g.correlation - e.correlation) < 1e-12, (w, g.correlation, e.correlation)


def chunks(xs: list, sizes: list[int]) -> list[list]:
    out, i = [], 0
    for n in sizes:
        out.append(xs[i:i + n])
        i += n
    out.append(xs[i:])
    return out


def test_equals_gather_on_a_crowd_added_in_passes() -> None:
    rng = random.Random(7)
    labels = crowd_labels(rng, items=300, per_item=5, workers=25, spammers=5, values=[1, 2, 3, 4, 5])
    traps = [TrapResult(worker=f"W{rng.randrange(25)}", assignment=f"t{n}", item=f"trap{n}", value=5.0, passed=rng.random() < 0.8)
             for n in range(60)]
    book = RunningEvidence()
    for part in chunks(labels, [1, 7, 100, 500]):
        book.add(part, [])
    book.add([], traps)
    for min_shared in (0, 1, 5, 40):
        assert_same(book.evidence(min_shared), gather(labels, traps, min_shared))


def test_the_split_and_order_change_nothing_exactly() -> None:
    rng = random.Random(3)
    labels = crowd_labels(rng, items=120, per_item=4, workers=12, spammers=3, values=[1, 2, 3, 4, 5])
    one = RunningEvidence()
    one.add(labels)
    many = RunningEvidence()
    shuffled = labels[:]
    rng.shuffle(shuffled)
    for part in chunks(shuffled, [3, 50, 1, 200]):
        many.add(part)
    assert one.evidence(5) == many.evidence(5)  # dataclass equality: the very same floats


def test_values_that_are_not_whole_numbers_stay_exact() -> None:
    rng = random.Random(11)
    labels = crowd_labels(rng, items=80, per_item=5, workers=10, spammers=2, values=[-0.5, 0.1, 0.25, 1.75, 3.3])
    book = RunningEvidence()
    for part in chunks(labels, [10, 10, 100]):
        book.add(part)
    assert_same(book.evidence(5), gather(labels, [], 5))


def test_a_constant_worker_has_no_variance_and_counts_zero() -> None:
    labels = [Label(item=f"i{i}", worker="C", assignment=f"c{i}", value=3.0) for i in range(8)]
    labels += [Label(item=f"i{i}", worker="H", assignment=f"h{i}", value=float(i % 5 + 1)) for i in range(8)]
    book = RunningEvidence()
    book.add(labels)
    got = book.evidence(5)
    assert got["C"].constant and got["C"].correlation == 0.0
    assert not got["H"].constant
    assert_same(got, gather(labels, [], 5))


def test_any_labels_any_split() -> None:
    """Small random crowds (few items and workers, so shared items, repeats and lone labels are common)."""
    rng = random.Random(2026)
    for _ in range(300):
        labels = [Label(item=f"i{rng.randrange(7)}", worker=f"W{rng.randrange(5)}", assignment=f"a{n}",
                        value=float(rng.randint(1, 5))) for n in range(rng.randrange(80))]
        sizes = [rng.randrange(30) for _ in range(rng.randrange(5))]
        book = RunningEvidence()
        for part in chunks(labels, sizes):
            book.add(part)
        min_shared = rng.randrange(7)
        assert_same(book.evidence(min_shared), gather(labels, [], min_shared))


def test_items_let_go_when_complete_and_read_back_for_a_later_label_change_nothing() -> None:
    """An item with every slot answered is let go (`retire`); a repeat's or a replacement's label for it
    later needs its earlier labels back first (`restore`), after which the evidence is exactly gather's."""
    rng = random.Random(5)
    restored = 0
    for trial in range(40):
        per_item = rng.randint(2, 6)
        labels = crowd_labels(rng, items=60, per_item=per_item, workers=9, spammers=2, values=[1, 2, 3, 4, 5])
        rng.shuffle(labels)
        complete = rng.randint(1, per_item)
        book, plain = RunningEvidence(), RunningEvidence()
        added: list[Label] = []
        for part in chunks(labels, [rng.randrange(1, 40) for _ in range(6)]):
            back = book.let_go({lab.item for lab in part})
            if back:
                book.restore(back, [lab for lab in added if lab.item in back])
                restored += len(back)
            book.add(part)
            plain.add(part)
            added += part
            book.retire(complete)
            assert all(len(flat) // 2 < complete for flat in book.items.values())
        assert book.evidence(3) == plain.evidence(3), trial
        assert_same(book.evidence(3), gather(labels, [], 3))
        assert book.retired and len(book.items) < len(plain.items), trial  # something was let go
    assert restored  # and something came back


def test_a_label_for_an_item_let_go_is_refused_until_its_labels_are_back() -> None:
    first = [Label(item="i1", worker=w, assignment=f"a{w}", value=float(v)) for w, v in (("A", 1), ("B", 2))]
    book = RunningEvidence()
    book.add(first)
    assert book.retire(2) == 1 and "i1" not in book.items and len(book.retired) == 1 and book.retired["i1"] == 2
    late = [Label(item="i1", worker="C", assignment="aC", value=3.0)]
    with pytest.raises(RetiredItem, match="i1"):
        book.add(late)
    with pytest.raises(RestoreMismatch, match="i1"):  # one label short of what it had: nothing changes
        book.restore({"i1"}, first[:1])
    assert len(book.retired) == 1 and book.retired["i1"] == 2
    book.restore({"i1"}, first)
    book.add(late)
    assert_same(book.evidence(1), gather(first + late, [], 1))


def test_an_item_asked_back_with_no_labels_does_not_match() -> None:
    book = RunningEvidence()
    book.add([Label(item="i1", worker="A", assignment="a1", value=1.0)])
    book.retire(1)
    with pytest.raises(RestoreMismatch, match="i1"):
        book.restore({"i1"}, [])
    assert book.retired["i1"] == 1


@pytest.fixture
def one_hash(monkeypatch):
    """Every item's hash the same: what two items sharing a 64-bit hash would do."""
    monkeypatch.setattr(RetiredItems, "_hash", staticmethod(lambda item: 7))


def test_items_sharing_a_hash_are_never_taken_for_each_other(one_hash) -> None:
    a = [Label(item="A", worker=w, assignment=f"a{w}", value=float(v)) for w, v in (("X", 1), ("Y", 2))]
    b = [Label(item="B", worker="X", assignment="bX", value=3.0)]
    book = RunningEvidence()
    book.add(a + b)
    assert book.retire(2) == 1  # A let go; B, held, shares its hash
    assert book.let_go({"A", "B"}) == {"A"}
    book.add([Label(item="B", worker="Y", assignment="bY", value=4.0)])  # held: no read-back needed
    book.retire(2)  # B let go too: the shared hash is marked, no read-back can match it
    with pytest.raises(RestoreMismatch):
        book.restore({"A"}, a)
    with pytest.raises(RestoreMismatch):
        book.restore({"B"}, b)


def test_a_daemon_reading_everything_again_after_a_shared_hash_counts_each_label_once(one_hash) -> None:
    rng = random.Random(3)
    labels = crowd_labels(rng, items=30, per_item=3, workers=6, spammers=1, values=[1, 2, 3, 4, 5])
    book = RunningEvidence()
    added: list[Label] = []
    rebuilt = 0
    for part in chunks(labels, [10, 10, 10, 10, 10, 10, 10, 10]):
        back = book.let_go({lab.item for lab in part})
        if back:
            try:
                book.restore(back, [lab for lab in added if lab.item in back])
            except RestoreMismatch:  # what `running_evidence` does: a new book from the first label
                book, rebuilt = RunningEvidence(), rebuilt + 1
                book.add(added)
        book.add(part)
        added += part
        book.retire(3)
    assert_same(book.evidence(2), gather(labels, [], 2))
    assert rebuilt  # the shared hash was met, and read past


def test_sums_turn_exact_objects_when_a_label_is_not_a_small_whole_number() -> None:
    """Whole numbers of at most `SMALL` keep the sums in 64-bit columns; the first label that is not
    (a fraction, a large number) turns them into Python objects mid-run, with nothing counted lost."""
    rng = random.Random(5)
    whole = crowd_labels(rng, items=60, per_item=5, workers=9, spammers=2, values=[1, 2, 3, 4, 5])
    odd = crowd_labels(rng, items=30, per_item=5, workers=9, spammers=2, values=[0.5, 2.25, 4])
    big = [Label(item=f"b{i}", worker=f"W{k}", assignment=f"b{i}-{k}", value=float(10**15 + i * k)) for i in range(20) for k in range(4)]
    for extra in (odd, big):
        book = RunningEvidence()
        book.add(whole[:150])
        assert book.workers.n.dtype == np.int64
        book.add(whole[150:] + extra[:40])
        assert book.workers.exact and book.workers.n.dtype == object
        book.add(extra[40:])
        assert_same(book.evidence(3), gather(whole + extra, [], 3))


def test_a_worker_costs_a_row_of_columns() -> None:
    """1,450 workers of 11,750 items x 5 labels (a 470,000 run's campaign): the columns hold under 200
    bytes a worker (the record objects they replaced took ~580)."""
    rng = random.Random(2)
    labels = crowd_labels(rng, items=11_750, per_item=5, workers=1_450, spammers=100, values=[1, 2, 3, 4, 5])
    book = RunningEvidence()
    for part in chunks(labels, [5_000] * 11):
        book.add(part)
        book.retire(5)
    sums = book.workers
    held = sum(a.nbytes for a in (sums.n, sums.x, sums.xx, sums.labels, sums.traps_seen, sums.traps_passed, sums.by_c, sums.varied))
    assert len(sums) == 1_450 and held / len(sums) < 200
