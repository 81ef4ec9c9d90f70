"""The daemon's heartbeat and its acknowledgement of the user's intents, kept in the store.

Without it the dashboard can only guess liveness from the newest write (events, ledger entries), and an
idle daemon beside a paused campaign writes nothing. To wire it, the daemon calls
`record_heartbeat(ctx.store, ctx.name, status, ctx.clock.now(), getattr(ctx.clock, "speed", 1.0))` at the
top of each tick, right after reading the campaign's status (campaign/daemon.py `tick`). The first tick
that sees a new status (paused, running again, cancelling) writes one `acknowledged` event: that is the
acknowledgement the dashboard shows after `p` or `c`.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from campaign.state import Keys
from campaign.store import Store

ACK_KIND = "acknowledged"

ACK_TEXT = {
    "paused": "daemon: paused; no new HITs are posted and no work is reviewed",
    "running": "daemon: running",
    "cancelling": "daemon: cancelling; expiring open HITs",
}


def heartbeat_value(status: str, wall: float, clock_now: float, speed: float, pid: int) -> str:
    """What one heartbeat holds: the status the daemon acted on, and a wall/clock pair with the speed,
    from which a reader on another machine can tell the campaign clock's time now."""
    return json.dumps({"status": status, "wall": wall, "clock": clock_now, "speed": speed, "pid": pid}, sort_keys=True)


def parse(value: str | None) -> dict[str, Any] | None:
    if not value:
        return None
    try:
        data = json.loads(value)
    except ValueError:
        return None
    return data if isinstance(data, dict) and "wall" in data else None


def record_heartbeat(store: Store, campaign: str, status: str, clock_now: float, speed: float = 1.0,
                     wall: float | None = None) -> bool:
    """Write the heartbeat; when the status differs from the last heartbeat's, write one acknowledgement
    event in the same transaction. Returns True when it acknowledged a change."""
    from sqlmodel import select

    from campaign.store import KVRow

    wall = time.time() if wall is None else wall
    value = heartbeat_value(status, wall, clock_now, speed, os.getpid())
    with store.session() as s:
        row = s.exec(select(KVRow).where(KVRow.campaign == campaign, KVRow.key == Keys.HEARTBEAT)).first()
        before = parse(row.value) if row is not None else None
        changed = before is not None and before.get("status") != status
        if row is None:
            s.add(KVRow(campaign=campaign, key=Keys.HEARTBEAT, value=value))
        else:
            row.value = value
            s.add(row)
        if changed:
            store.event(campaign, ACK_KIND, ACK_TEXT.get(status, f"daemon: now {status}"), data={"status": status}, session=s)
    return changed
