"""Pack chosen pairs into 5-item ranking HITs that cover them with few HITs.

A worker who orders 5 items answers all 10 pairs among them, so a chosen pair is "covered" by any HIT
that shows both of its items. Finding the fewest 5-sets covering a graph's edges is NP-hard; a greedy
cover is close enough here and, more importantly, deterministic: each HIT starts from the uncovered pair
whose items have the most uncovered partners, then repeatedly adds the item that covers the most
uncovered pairs with the items already in the HIT. HITs come out in order of decreasing usefulness, so a
caller that can afford only `max_hits` HITs keeps the best ones. When no item adds coverage, the HIT is
filled from the caller's `fill` preference (e.g. the most uncertain items), so every HIT has exactly
`size` distinct items and the extra pairs are still informative.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

HIT_SIZE = 5


def _norm(a: Hashable, b: Hashable, pos: dict[Hashable, int]) -> tuple[Hashable, Hashable]:
    return (a, b) if pos[a] <= pos[b] else (b, a)


def pack_pairs(
    pairs: Iterable[tuple[Hashable, Hashable]],
    size: int = HIT_SIZE,
    fill: Sequence[Hashable] | None = None,
    max_hits: int | None = None,
) -> list[tuple[Hashable, ...]]:
    """HITs (tuples of `size` distinct items) whose pairs cover every given pair (or the best `max_hits`)."""
    if size < 2:
        raise ValueError("a ranking HIT needs at least 2 items")
    pos: dict[Hashable, int] = {}
    plist: list[tuple[Hashable, Hashable]] = []
    for a, b in pairs:
        if a == b:
            raise ValueError(f"a pair needs two different items, got {a!r} twice")
        for x in (a, b):
            pos.setdefault(x, len(pos))
        plist.append((a, b))
    for x in fill or ():
        pos.setdefault(x, len(pos))
    if not plist:
        return []
    if len(pos) < size:
        raise ValueError(f"need at least {size} distinct items to fill a {size}-item HIT, have {len(pos)}")

    uncovered: set[tuple[Hashable, Hashable]] = set()
    order: list[tuple[Hashable, Hashable]] = []
    for a, b in plist:
        p = _norm(a, b, pos)
        if p not in uncovered:
            uncovered.add(p)
            order.append(p)
    adj: dict[Hashable, set[Hashable]] = {x: set() for x in pos}
    for a, b in uncovered:
        adj[a].add(b)
        adj[b].add(a)
    fill_order = list(fill or ()) + sorted(pos, key=pos.__getitem__)

    hits: list[tuple[Hashable, ...]] = []
    while uncovered and (max_hits is None or len(hits) < max_hits):
        a, b = max(
            (p for p in order if p in uncovered),
            key=lambda p: (len(adj[p[0]]) + len(adj[p[1]]), -pos[p[0]], -pos[p[1]]),
        )
        group = [a, b]
        members = {a, b}
        while len(group) < size:
            cands = {c for m in group for c in adj[m]} - members
            best = None
            if cands:
                best = max(cands, key=lambda c: (len(adj[c] & members), len(adj[c]), -pos[c]))
            if best is None:
                best = next(c for c in fill_order if c not in members)
            group.append(best)
            members.add(best)
        for x in group:
            inside = adj[x] & members
            for y in inside:
                uncovered.discard(_norm(x, y, pos))
            adj[x] -= inside
        hits.append(tuple(group))
    return hits


def pairs_of_hit(hit: Sequence[Hashable]) -> list[tuple[Hashable, Hashable]]:
    """The unordered pairs a HIT shows (10 for 5 items)."""
    return [(hit[a], hit[b]) for a in range(len(hit)) for b in range(a + 1, len(hit))]


def coverage(hits: Sequence[Sequence[Hashable]], pairs: Iterable[tuple[Hashable, Hashable]]) -> float:
    """Share of the given pairs that some HIT shows (1.0 = all covered)."""
    shown = {frozenset(p) for h in hits for p in pairs_of_hit(h)}
    wanted = {frozenset(p) for p in pairs}
    return len(wanted & shown) / len(wanted) if wanted else 1.0
