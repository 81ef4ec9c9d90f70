"""What a task kind's simulated answer is given: the simulated worker and the HIT page's form, as protocols.

A kind's `simulate(worker, form, truth_of, rng)` answers a page the way its model of a worker would
(`campaign.tasks.likert.likert_answer` and its peers); the simulated crowd (`campaign.crowd`) owns the
workers and reads the pages, and passes both in. Typed here, so production code (the task kinds) never
imports the simulated crowd, which sits above it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol


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
