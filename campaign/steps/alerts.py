"""Alerts as events: each condition the dashboard flags is written to the event log once when it appears.

A daemon step (wire it into each tick); it reads the same figures the dashboard shows and keeps the keys
of the alerts currently standing under the `alerts:active` key, so a standing condition is one event,
and an alert that cleared and comes back is a new one. Safe to run from several processes: the event
and the new set of keys are written in one transaction.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from sqlmodel import select

from campaign.readmodel.alerts import Alert
from campaign.readmodel.snapshot import Reader
from campaign.state import Keys
from campaign.store import KVRow, Store

EVENT_KIND = "alert"


def raise_alerts(store: Store, campaign_name: str, now: float | None = None, state_dir: Path | None = None,
                 reader: Reader | None = None) -> list[Alert]:
    """Write an `alert` event for every alert that was not standing at the last call; returns those.

    `reader`: a Reader kept from the last call (the daemon keeps one per campaign in its step context),
    which reads only the answers collected since; without one, a new Reader reads them all."""
    now = time.time() if now is None else now
    current = (reader or Reader(store, state_dir)).alerts(campaign_name, now)
    new: list[Alert] = []
    with store.session() as s:
        row = s.exec(select(KVRow).where(KVRow.campaign == campaign_name, KVRow.key == Keys.ALERTS_ACTIVE)).first()
        standing = set(json.loads(row.value)) if row is not None else set()
        for a in current:
            if a.key not in standing:
                store.event(campaign_name, EVENT_KIND, a.message, level=a.level, subject=a.key, session=s)
                new.append(a)
        keys = json.dumps(sorted(a.key for a in current))
        if row is None:
            s.add(KVRow(campaign=campaign_name, key=Keys.ALERTS_ACTIVE, value=keys))
        elif row.value != keys:
            row.value = keys
            s.add(row)
    return new
