"""The client's tests run against the emulator, and against real Prolific when asked.

`PROLIFIC_TOKEN` + `CAMPAIGN_PROLIFIC_LIVE=1` switch the `api` fixture to the real service (the tests
that need simulated participants then skip, saying so); otherwise an emulator is started per test.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from campaign.clock import ManualClock
from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.server import start_emulator
from tests.prolific.support import LIVE, Api


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
