"""The evidence of `campaign.quality.evidence.gather`, kept up to date label by label.

Quality control runs on every pass that brought enough new answers, over every label of the stage so
far. Recomputing the worker-rest correlations from all labels made a policy run cost 6 us per label:
2 s per pass at the seed's 235,000 labels, the one part of a pass that grew with the campaign rather
than with its new work. Here a new label touches only its item: the pairs (the label, the sum of the
other workers' labels on the item) of that item's labels are taken out of their workers' sums and put
back with the new label counted, so a pass costs what its new labels cost.

The sums are exact (Python integers, `Fraction` for a value that is not a whole number), and a
correlation is computed from them once, exactly, and rounded at the end. So the result depends only
on which labels were added, never on how they were split between passes or in which order they came:
a daemon that looked more or less often, or a restarted one that reads everything again, decides the
same. It equals `gather` up to float rounding (tested).

An item whose every slot is answered is let go (`retire`: its pairs stay in the sums, its labels leave
memory), so a daemon holds the labels of the open work, not of the whole campaign; the rare label that
comes later for such an item (a repeat HIT, a replaced answer) first gets the item's earlier labels back
from the store (`restore`), which checks it got as many as the item had.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from collections.abc import Iterable
from fractions import Fraction

import numpy as np

from campaign.quality.evidence import Label, TrapResult, WorkerEvidence, constant_answers

Number = int | Fraction


def _exact(value: float) -> Number:
    return int(value) if float(value).is_integer() else Fraction(value)


class _Sums:
    """Every worker's running figures, one row a worker in typed columns: their pairs (x = their label,
    y = mean of the others' labels on the item) as exact sums, how many labels they gave, whether they
    gave two distinct values yet (enough to tell "constant") and their traps.

    y = s / c (s: the others' sum, c: how many others), so the y sums are kept per c as integer sums of
    s, x*s and s*s (`by_c[row, 3 * (c - 1)]`...): no division until the correlation is taken. A daemon
    holds a row for each worker of each campaign (~29,000 at 470,000 propositions): 48 bytes plus 24
    per c where a record object per worker, its list and its Python integers took ~580.

    The columns are 64-bit integers while every label is a whole number of at most `SMALL` in size
    (every sum then stays far inside 64 bits: |s*s| <= (c * SMALL)^2 a pair); the first label that is
    not makes them Python objects (exact integers and fractions), exact as before, and they stay so."""

    SMALL = 1 << 10
    GROWTH = 1.25

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.names: list[str] = []  # the book's one copy of each id (interned: shared with other campaigns')
        self.exact = False  # True: object columns
        self.n = np.zeros(0, dtype=np.int64)
        self.x = np.zeros(0, dtype=np.int64)
        self.xx = np.zeros(0, dtype=np.int64)
        self.labels = np.zeros(0, dtype=np.int64)
        self.traps_seen = np.zeros(0, dtype=np.int64)
        self.traps_passed = np.zeros(0, dtype=np.int64)
        self.by_c = np.zeros((0, 0), dtype=np.int64)
        self.varied = np.zeros(0, dtype=bool)  # two distinct values seen
        self.first: dict[int, Number] = {}  # rows with one distinct value so far: that value

    def __len__(self) -> int:
        return len(self.names)

    def row(self, name: str) -> int:
        """The worker's row, made on first sight."""
        got = self.index.get(name)
        if got is None:
            name = sys.intern(name)
            got = self.index[name] = len(self.names)
            self.names.append(name)
            self._room(got + 1, self.by_c.shape[1])
        return got

    def _room(self, rows: int, width: int) -> None:
        have_rows, have_width = self.by_c.shape
        if rows <= len(self.n) and width <= have_width:
            return
        size = len(self.n) if rows <= len(self.n) else max(rows, int(len(self.n) * self.GROWTH) + 16)
        for name in ("n", "x", "xx", "labels", "traps_seen", "traps_passed", "varied"):
            old = getattr(self, name)
            new = np.zeros(size, dtype=old.dtype)
            new[:len(old)] = old
            setattr(self, name, new)
        by_c = np.zeros((size, max(width, have_width)), dtype=self.by_c.dtype)
        by_c[:have_rows, :have_width] = self.by_c
        self.by_c = by_c

    def make_exact(self) -> None:
        """Object columns from now on (Python integers; fractions may join them)."""
        if self.exact:
            return
        for name in ("n", "x", "xx", "by_c"):
            setattr(self, name, getattr(self, name).astype(object))
        self.exact = True

    def fits(self, x: Number, c: int) -> bool:
        return isinstance(x, int) and abs(x) <= self.SMALL and c <= self.SMALL

    def add(self, pairs: list[tuple[int, Number, Number, int]], sign: int) -> None:
        """Count each (row, x, s, c) in (sign 1) or take it out (sign -1)."""
        if not pairs:
            return
        if not self.exact and not all(self.fits(x, c) and self.fits(s, c) for _, x, s, c in pairs):
            self.make_exact()
        rows = [p[0] for p in pairs]
        width = 3 * max(p[3] for p in pairs)
        self._room(len(self.names), width)
        dtype = object if self.exact else np.int64
        xs = np.array([p[1] for p in pairs], dtype=dtype)
        ss = np.array([p[2] for p in pairs], dtype=dtype)
        # by_c's cells as positions in its flat view (a view: the columns are contiguous)
        cell = np.array(rows, dtype=np.int64) * self.by_c.shape[1] + np.array([3 * (p[3] - 1) for p in pairs], dtype=np.int64)
        flat = self.by_c.reshape(-1)
        np.add.at(self.n, rows, sign)
        np.add.at(self.x, rows, sign * xs)
        np.add.at(self.xx, rows, sign * xs * xs)
        np.add.at(flat, cell, sign * ss)
        np.add.at(flat, cell + 1, sign * xs * ss)
        np.add.at(flat, cell + 2, sign * ss * ss)

    def saw(self, row: int, value: Number) -> None:
        """A label of `value` from the worker of `row` (its first two distinct values tell "constant")."""
        self.labels[row] += 1
        if self.varied[row]:
            return
        first = self.first.get(row)
        if first is None:
            self.first[row] = value
        elif first != value:
            self.varied[row] = True
            del self.first[row]

    def distinct(self, row: int) -> int:
        """How many distinct values the worker gave, counted to two."""
        return 2 if self.varied[row] else int(row in self.first)

    def correlation(self, row: int) -> float | None:
        """Pearson's r of the worker's pairs, None when either side has no variance."""
        n = int(self.n[row])
        if n < 2:
            return None
        b = self.by_c[row].tolist()
        groups = [(g // 3 + 1, b[g], b[g + 1], b[g + 2]) for g in range(0, len(b), 3) if b[g] or b[g + 1] or b[g + 2]]
        sy = sum((Fraction(s, c) for c, s, _, _ in groups), Fraction(0))
        sxy = sum((Fraction(xs, c) for c, _, xs, _ in groups), Fraction(0))
        syy = sum((Fraction(ss, c * c) for c, _, _, ss in groups), Fraction(0))
        x, xx = self.x[row], self.xx[row]
        x = x if self.exact else int(x)
        xx = xx if self.exact else int(xx)
        cov = n * sxy - x * sy
        vx = n * xx - x * x
        vy = n * syy - sy * sy
        if vx <= 0 or vy <= 0:
            return None
        r2 = Fraction(cov) * cov / (Fraction(vx) * vy)
        return math.copysign(math.sqrt(min(1.0, float(r2))), float(cov))


def _pairs(flat: tuple[str | Number, ...]) -> list[tuple[str, Number, Number, int]]:
    """(worker, x, sum of the other workers' labels, how many) for each label of one item with another
    worker's beside it. An item's labels are one flat tuple (worker, value, worker, value, ...): a daemon
    keeps every item of every campaign it holds, so a label costs two tuple slots (16 bytes) rather than
    a tuple of its own (64), and a tuple, unlike a list, keeps no spare room (an item of 5 labels: 120
    bytes, where a list grown by appends took 184 and its holder object 48 more); the worker ids are the
    book's one copy of each (`RunningEvidence._names`)."""
    labels: list[tuple[str, Number]] = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]  # type: ignore[misc]
    total: Number = 0
    mine: dict[str, list[Number]] = {}
    for w, v in labels:
        total += v
        m = mine.get(w)
        if m is None:
            mine[w] = [v, 1]
        else:
            m[0] += v
            m[1] += 1
    size = len(labels)
    out = []
    for w, v in labels:
        own_sum, own_n = mine[w]
        c = size - int(own_n)
        if c:
            out.append((w, v, total - own_sum, c))
    return out


class RetiredItem(ValueError):
    """Labels came for items whose earlier labels were let go (`RunningEvidence.retire`)."""

    def __init__(self, items: list[str]) -> None:
        super().__init__(f"{len(items)} retired item(s) need their labels restored first: {', '.join(items[:5])}")
        self.items = items


class RestoreMismatch(ValueError):
    """The labels read back for retired items are not the ones they had (`RunningEvidence.restore`)."""

    def __init__(self, items: list[str]) -> None:
        super().__init__(f"{len(items)} retired item(s) read back with another number of labels: {', '.join(items[:5])}")
        self.items = items


class RetiredItems:
    """The items let go (`RunningEvidence.retire`) and how many labels each had, by the item's hash: a
    sorted array of 64-bit hashes and one of counts, 12 bytes an item. A daemon lets go of every item of
    every campaign it holds (20 campaigns of 11,750 at 470,000 propositions), and a dict of their names
    took ~95 bytes an item (1.1 MiB a campaign).

    Two items with one hash (a 2^-64 chance a pair) must never be mistaken for each other: an item the
    book holds is never taken for a let-go one (`RunningEvidence.let_go`), a hash let go twice is marked
    (count -1) so that no read-back can match it, and an item asked back that gets no labels does not
    match either: each of these ends in `RestoreMismatch`, and the stage is read again from its first
    label. Slower, never wrong."""

    def __init__(self) -> None:
        self._keys = np.zeros(0, dtype=np.int64)
        self._counts = np.zeros(0, dtype=np.int32)

    @staticmethod
    def _hash(item: str) -> int:
        return hash(item)  # this process's own: the set lives in memory only

    def _find(self, item: str) -> int | None:
        h = self._hash(item)
        i = int(np.searchsorted(self._keys, h))
        return i if i < len(self._keys) and int(self._keys[i]) == h else None

    def __contains__(self, item: object) -> bool:
        return isinstance(item, str) and self._find(item) is not None

    def __getitem__(self, item: str) -> int:
        i = self._find(item)
        if i is None:
            raise KeyError(item)
        return int(self._counts[i])

    def __len__(self) -> int:
        return len(self._keys)

    def total(self) -> int:
        """Labels the items let go had, together."""
        return int(self._counts.sum())

    def update(self, counts: dict[str, int]) -> None:
        """Let these items go with these counts. An item is let go again only after `discard`, so a
        hash already here (or twice in `counts`) is two items: it is marked -1, which no count matches."""
        if not counts:
            return
        keys = np.concatenate([self._keys, np.fromiter((self._hash(k) for k in counts), dtype=np.int64, count=len(counts))])
        values = np.concatenate([self._counts, np.fromiter(counts.values(), dtype=np.int32, count=len(counts))])
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], values[order]
        first = np.ones(len(keys), dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        if not first.all():  # a shared hash: one entry, marked
            starts = np.flatnonzero(first)
            shared = np.diff(np.append(starts, len(keys))) > 1  # entries per hash
            values = values[starts]
            values[shared] = -1
            keys = keys[starts]
        self._keys, self._counts = keys, values

    def discard(self, items: Iterable[str]) -> None:
        gone = np.fromiter((self._hash(k) for k in items), dtype=np.int64)
        keep = ~np.isin(self._keys, gone)
        self._keys, self._counts = self._keys[keep], self._counts[keep]


class RunningEvidence:
    """`gather(labels, traps, min_shared)` over every label and trap result added so far."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[str | Number, ...]] = {}  # item -> its labels, flat (`_pairs`)
        # every worker's figures, a row each; its list of names is the book's one copy of each id: the
        # labels come from the store one row each, and a copy of the id per label was 45% of a
        # campaign's evidence (4.3 of 9.5 MiB at 11,750 items x 5 labels)
        self.workers = _Sums()
        # items whose labels were let go (`retire`): their pairs stay counted in the workers' sums, and a
        # label that comes for one later needs its earlier labels given back first (`restore`)
        self.retired = RetiredItems()
        self._touched: set[str] = set()  # items given labels since the last `retire`

    def let_go(self, items: Iterable[str]) -> set[str]:
        """Those of `items` whose labels were let go (an item the book holds never is)."""
        return {item for item in items if item not in self.items and item in self.retired}

    def add(self, labels: Iterable[Label], traps: Iterable[TrapResult] = ()) -> None:
        labels = list(labels)
        back = sorted(self.let_go({lab.item for lab in labels}))
        if back:  # its earlier pairs would be counted twice: the caller must `restore` them first
            raise RetiredItem(back)
        sums = self.workers
        new: dict[str, list[tuple[str, Number]]] = defaultdict(list)
        for lab in labels:
            v = _exact(lab.value)
            row = sums.row(lab.worker)
            new[lab.item].append((sums.names[row], v))
            sums.saw(row, v)
        out: list[tuple[int, Number, Number, int]] = []
        back_in: list[tuple[int, Number, Number, int]] = []
        index = sums.index
        for item, added in new.items():
            flat = self.items.get(item, ())
            out += [(index[w], x, s, c) for w, x, s, c in _pairs(flat)]
            flat = self.items[item] = flat + tuple(x for label in added for x in label)
            back_in += [(index[w], x, s, c) for w, x, s, c in _pairs(flat)]
            self._touched.add(item)
        sums.add(out, -1)
        sums.add(back_in, 1)
        for t in traps:
            row = sums.row(t.worker)
            sums.traps_seen[row] += 1
            sums.traps_passed[row] += int(t.passed)

    def retire(self, complete: int) -> int:
        """Let go of the labels of every item given labels since the last call that now has at least
        `complete` of them (the stage's assignments: every slot answered), keeping only its hash; returns
        how many. What a daemon holds then follows the open work, not the campaign's size: the items'
        labels were most of a daemon's growth at 470,000 propositions (20 campaigns of 11,750 items).
        Nothing counted changes: an item's pairs are in its workers' sums already."""
        done: dict[str, int] = {}
        for item in self._touched:
            flat = self.items.get(item)
            if flat is not None and len(flat) // 2 >= complete:
                del self.items[item]
                done[item] = len(flat) // 2
        self.retired.update(done)
        self._touched = set()
        if len(done) > len(self.items):  # a dict keeps the room of its most entries: give it back
            self.items = dict(self.items)
        return len(done)

    def restore(self, items: Iterable[str], labels: Iterable[Label]) -> None:
        """Give the let-go `items` back every label they had been given (read again from the store),
        before a new label for them is added; other labels are ignored. The sums stay as they are: those
        pairs were never taken out. `RestoreMismatch` (nothing changed) when an item would get back
        another number of labels than it had: the caller then reads everything again."""
        wanted = self.let_go(items)
        back: dict[str, list[str | Number]] = {item: [] for item in wanted}
        sums = self.workers
        for lab in labels:
            if lab.item in back:
                back[lab.item] += [sums.names[sums.row(lab.worker)], _exact(lab.value)]
        wrong = sorted(item for item, flat in back.items() if len(flat) // 2 != self.retired[item])
        if wrong:
            raise RestoreMismatch(wrong)
        for item, flat in back.items():
            self.items[item] = tuple(flat)
        self.retired.discard(back)

    def evidence(self, min_shared: int) -> dict[str, WorkerEvidence]:
        """What `gather` gives for the same labels and traps (without competence)."""
        out = {}
        sums = self.workers
        labels, seen, passed, n = (a.tolist() for a in (sums.labels, sums.traps_seen, sums.traps_passed, sums.n))
        for w, row in sorted(sums.index.items()):
            if not (labels[row] or seen[row]):
                continue
            r: float | None = None
            if n[row] >= min_shared:
                got = sums.correlation(row)
                r = 0.0 if got is None else got  # no variance: no information about the order of items
            out[w] = WorkerEvidence(worker=w, labels=labels[row], shared_items=int(n[row]), correlation=r,
                                    traps_seen=seen[row], traps_passed=passed[row],
                                    constant=constant_answers(labels[row], sums.distinct(row), min_shared))
        return out
