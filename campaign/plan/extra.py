"""How many replacement slots a HIT may gain: pure, shared by the replace step and the cost estimate."""

from __future__ import annotations

import math

MAX_EXTRA_SHARE = 0.5  # extra slots over a HIT's life, as a share of its first assignments (at least 1)
MTURK_TIER = 10  # a HIT created with fewer assignments cannot be extended to this many or more


def extra_allowance(first: int) -> int:
    """The most slots a HIT first posted with `first` assignments may gain over its life."""
    limit = max(1, math.floor(first * MAX_EXTRA_SHARE))
    return min(limit, MTURK_TIER - 1 - first) if first < MTURK_TIER else limit


def plan_extra(first: int, slots: int, decided: int, approved: int, open_: int) -> int:
    """How many slots to add to a HIT now (0: none). `first`: the stage's assignments (what the HIT was
    posted with); `slots`: its slot count now (first + every extra so far); `decided`: its assignments
    decided; `approved`: those approved whose labels quality control did not all leave out (random work
    that is paid but excluded does not count); `open_`: assignments not decided yet (submitted, being
    decided, held).

    Pure: only a HIT with every slot decided and nothing open is topped up, to `first` approved answers,
    within the HIT's remaining allowance and below MTurk's 10-assignment tier."""
    if open_ or decided < slots or approved >= first:
        return 0
    return max(0, min(first - approved, extra_allowance(first) - (slots - first)))
