"""The client's tests run against the emulator, and against real Prolific when asked.

`PROLIFIC_TOKEN` + `CAMPAIGN_PROLIFIC_LIVE=1` switch the `api` fixture to the real service (the tests
that need simulated participants then skip, saying so); otherwise an emulator is started per test.
Where Prolific's API description is at hand (`tests/prolific/contract.py`), every answer of every
emulator a test here starts in-process is checked against it too.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from campaign.clock import ManualClock
from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.server import EmulatorApp, start_emulator
from tests.prolific.contract import contract, find_spec, observer
from tests.prolific.support import LIVE, Api


@pytest.fixture(autouse=True)
def answers_as_described(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if find_spec() is None:
        yield
        return
    c = contract()
    made = EmulatorApp.__init__

    def init(self: EmulatorApp, emulator: object) -> None:
        made(self, emulator)  # type: ignore[arg-type]
        self.observers.append(observer(c, requests=False))
    monkeypatch.setattr(EmulatorApp, "__init__", init)
    yield
    assert not c.violations, "emulator answers outside Prolific's description:\n" + c.report()


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    if LIVE:
        yield Api(ProlificClient(), None, None)
        return
    clock = ManualClock()
    em = start_emulator(tmp_path / "prolific", clock, fee_rate=Decimal("0.333"), vat_rate=Decimal("0.2"))
    try:
        yield Api(ProlificClient(em.base_url, em.token, max_retries=1, sleep=lambda s: None), em, clock)
    finally:
        em.stop()
