"""`python tests/dashboard/run_daemon.py run ...`: the daemon with the dashboard's two daemon-side hooks
wired in, as campaign/daemon.py is meant to wire them (heartbeat.py and steps/alerts.py say where):
a heartbeat (with its acknowledgement of a new status) before each tick, alerts after it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from campaign import daemon  # noqa: E402
from campaign.cli import main  # noqa: E402
from campaign.dashboard.heartbeat import record_heartbeat  # noqa: E402
from campaign.steps.alerts import raise_alerts  # noqa: E402
from campaign.store import CampaignRow  # noqa: E402

_tick = daemon.tick


def tick(ctx) -> None:  # type: ignore[no-untyped-def]
    with ctx.store.session() as s:
        status = s.get(CampaignRow, ctx.name).status
    record_heartbeat(ctx.store, ctx.name, status, ctx.clock.now(), getattr(ctx.clock, "speed", 1.0))
    _tick(ctx)
    raise_alerts(ctx.store, ctx.name, state_dir=ctx.state_dir)


daemon.tick = tick

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
