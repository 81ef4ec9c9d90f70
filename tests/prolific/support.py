"""Shared by the Prolific tests: which service they run against, and the handle they get."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from campaign.clock import ManualClock
from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.server import RunningEmulator

LIVE = bool(os.environ.get("PROLIFIC_TOKEN")) and os.environ.get("CAMPAIGN_PROLIFIC_LIVE") == "1"


@dataclass
class Api:
    client: ProlificClient
    emulator: RunningEmulator | None
    clock: ManualClock | None

    def need_emulator(self) -> RunningEmulator:
        if self.emulator is None:
            pytest.skip("needs simulated participants, which only the emulator has (running against real Prolific)")
        return self.emulator
