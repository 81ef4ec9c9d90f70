"""What a task kind's simulated answer is given: the simulated worker and the HIT page's form, as protocols.

A kind's `simulate(worker, form, truth_of, rng)` answers a page the way its model of a worker would
(`campaign.tasks.likert.likert_answer` and its peers); the simulated crowd (`campaign.crowd`) owns the
workers and reads the pages, and passes both in. Typed here, so production code (the task kinds) never
imports the simulated crowd, which sits above it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

SPAMMER_KINDS = ("constant_spammer", "random_spammer")


def allot(n: int, mix: Mapping[str, float]) -> dict[str, int]:
    """How many of a simulated crowd's `n` workers are of each kind of `mix` (kind -> share; shares are
    normalised): by largest remainder, so the shares are met exactly where possible, and where they
    cannot be, which kind gets the odd worker is fixed (ties by kind name). Here, below the crowd, so
    the cost estimate counts a crowd's spammers as the crowd does (30 workers at 15% + 10% spammers are
    7, not 7.5) without importing it."""
    total = sum(mix.values())
    if total <= 0:
        raise ValueError("worker mix shares must add up to more than 0")
    quotas = {k: n * v / total for k, v in mix.items()}
    counts = {k: int(q) for k, q in quotas.items()}
    rest = n - sum(counts.values())
    for k in sorted(quotas, key=lambda k: (counts[k] - quotas[k], k))[:rest]:
        counts[k] += 1
    return counts


class SimulatedWorker(Protocol):
    """A simulated worker's hidden traits: its type (`kind`: diligent, noisy, biased or a spammer), how
    noisy its judgment of an item's importance is, how it leans, and the value a constant spammer gives."""

    @property
    def kind(self) -> str: ...

    @property
    def noise(self) -> float: ...

    @property
    def bias(self) -> float: ...

    @property
    def constant(self) -> int: ...

    @property
    def is_spammer(self) -> bool: ...


class FormSlot(Protocol):
    """One item shown on a HIT page: its position, its text, its radio group (Likert) and its attributes."""

    @property
    def index(self) -> int: ...

    @property
    def text(self) -> str: ...

    @property
    def radio_name(self) -> str | None: ...

    @property
    def attrs(self) -> Mapping[str, str]: ...


class PageForm(Protocol):
    """A HIT page's answer form as a worker's browser would read it: its item slots and the form's
    `data-*` attributes."""

    @property
    def slots(self) -> Sequence[FormSlot]: ...

    @property
    def data(self) -> Mapping[str, str]: ...
