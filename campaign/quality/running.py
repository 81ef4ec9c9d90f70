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
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction

from campaign.quality.evidence import Label, TrapResult, WorkerEvidence, constant_answers

Number = int | Fraction


def _exact(value: float) -> Number:
    return int(value) if float(value).is_integer() else Fraction(value)


@dataclass(slots=True)
class _Sums:
    """One worker's pairs (x = their label, y = mean of the others' labels on the item) as exact sums.

    y = s / c (s: the others' sum, c: how many others), so the y sums are kept per c as integer sums of
    s, x*s and s*s: no division until the correlation is taken."""

    n: int = 0
    x: Number = 0
    xx: Number = 0
    by_c: dict[int, list[Number]] = field(default_factory=dict)  # c -> [sum s, sum x*s, sum s*s]

    def add(self, x: Number, s: Number, c: int, sign: int) -> None:
        self.n += sign
        self.x += sign * x
        self.xx += sign * x * x
        g = self.by_c.get(c)
        if g is None:
            g = self.by_c[c] = [0, 0, 0]
        g[0] += sign * s
        g[1] += sign * x * s
        g[2] += sign * s * s
        if g == [0, 0, 0]:
            del self.by_c[c]

    def correlation(self) -> float | None:
        """Pearson's r of the pairs, None when either side has no variance."""
        n = self.n
        if n < 2:
            return None
        sy = sum((Fraction(g[0], c) for c, g in self.by_c.items()), Fraction(0))
        sxy = sum((Fraction(g[1], c) for c, g in self.by_c.items()), Fraction(0))
        syy = sum((Fraction(g[2], c * c) for c, g in self.by_c.items()), Fraction(0))
        cov = n * sxy - self.x * sy
        vx = n * self.xx - self.x * self.x
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


class RunningEvidence:
    """`gather(labels, traps, min_shared)` over every label and trap result added so far."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[str | Number, ...]] = {}  # item -> its labels, flat (`_pairs`)
        self.sums: dict[str, _Sums] = defaultdict(_Sums)
        self.labels: dict[str, int] = defaultdict(int)
        self.values: dict[str, set[Number]] = {}  # at most two distinct values per worker: enough for "constant"
        self.traps_seen: dict[str, int] = defaultdict(int)
        self.traps_passed: dict[str, int] = defaultdict(int)
        # each worker id once: the labels come from the store one row each, and a copy of the id per label
        # was 45% of a campaign's evidence (4.3 of 9.5 MiB at 11,750 items x 5 labels)
        self._names: dict[str, str] = {}
        # items whose labels were let go (`retire`): their pairs stay counted in the workers' sums, and a
        # label that comes for one later needs its earlier labels given back first (`restore`)
        self.retired: dict[str, int] = {}  # item -> how many labels it had
        self._touched: set[str] = set()  # items given labels since the last `retire`

    def add(self, labels: Iterable[Label], traps: Iterable[TrapResult] = ()) -> None:
        labels = list(labels)
        back = sorted({lab.item for lab in labels if lab.item in self.retired})
        if back:  # its earlier pairs would be counted twice: the caller must `restore` them first
            raise RetiredItem(back)
        new: dict[str, list[tuple[str, Number]]] = defaultdict(list)
        for lab in labels:
            v = _exact(lab.value)
            worker = self._names.setdefault(lab.worker, lab.worker)
            new[lab.item].append((worker, v))
            self.labels[worker] += 1
            seen = self.values.setdefault(worker, set())
            if len(seen) < 2:
                seen.add(v)
        for item, added in new.items():
            flat = self.items.get(item, ())
            for w, x, s, c in _pairs(flat):
                self.sums[w].add(x, s, c, -1)
            flat = self.items[item] = flat + tuple(x for label in added for x in label)
            for w, x, s, c in _pairs(flat):
                self.sums[w].add(x, s, c, 1)
            self._touched.add(item)
        for t in traps:
            self.traps_seen[t.worker] += 1
            self.traps_passed[t.worker] += int(t.passed)

    def retire(self, complete: int) -> int:
        """Let go of the labels of every item given labels since the last call that now has at least
        `complete` of them (the stage's assignments: every slot answered), keeping only its name; returns
        how many. What a daemon holds then follows the open work, not the campaign's size: the items'
        labels were most of a daemon's growth at 470,000 propositions (20 campaigns of 11,750 items).
        Nothing counted changes: an item's pairs are in its workers' sums already."""
        done = 0
        for item in self._touched:
            flat = self.items.get(item)
            if flat is not None and len(flat) // 2 >= complete:
                del self.items[item]
                self.retired[item] = len(flat) // 2
                done += 1
        self._touched = set()
        return done

    def restore(self, labels: Iterable[Label]) -> None:
        """Give retired items back every label they had been given (read again from the store), before
        a new label for them is added; labels of items not retired are ignored. The sums stay as they
        are: those pairs were never taken out. `RestoreMismatch` (nothing changed) when an item would
        get back another number of labels than it had: the caller then reads everything again."""
        back: dict[str, list[str | Number]] = defaultdict(list)
        for lab in labels:
            if lab.item in self.retired:
                back[lab.item] += [self._names.setdefault(lab.worker, lab.worker), _exact(lab.value)]
        wrong = sorted(item for item, flat in back.items() if len(flat) // 2 != self.retired[item])
        if wrong:
            raise RestoreMismatch(wrong)
        for item, flat in back.items():
            self.items[item] = tuple(flat)
            del self.retired[item]

    def evidence(self, min_shared: int) -> dict[str, WorkerEvidence]:
        """What `gather` gives for the same labels and traps (without competence)."""
        out = {}
        for w in sorted(set(self.labels) | set(self.traps_seen)):
            n_labels = self.labels.get(w, 0)
            sums = self.sums.get(w)
            shared = sums.n if sums is not None else 0
            r: float | None = None
            if shared >= min_shared:
                got = sums.correlation() if sums is not None else None
                r = 0.0 if got is None else got  # no variance: no information about the order of items
            out[w] = WorkerEvidence(worker=w, labels=n_labels, shared_items=shared, correlation=r,
                                    traps_seen=self.traps_seen.get(w, 0), traps_passed=self.traps_passed.get(w, 0),
                                    constant=constant_answers(n_labels, len(self.values.get(w, ())), min_shared))
        return out
