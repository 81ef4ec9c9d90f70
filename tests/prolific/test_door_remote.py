"""The Prolific door served by a marketplace process (`campaign market serve --prolific-door`) and asked by
daemons elsewhere (`RemoteDoor`): the same answers as the door itself, only for the requester's key."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from campaign.clock import ManualClock
from campaign.market.auth import sign_headers
from campaign.market.door_remote import RemoteDoor, RemoteDoorError
from campaign.market.server import start_market
from campaign.prolific.emulator.participant import add_participant
from campaign.prolific.emulator.server import start_emulator
from campaign.prolific.gate import StudySeat
from campaign.providers.prolific_door import DoorStartError, serve_door
from campaign.web.loopback import open_url

pytestmark = pytest.mark.prolific


def test_remote_door_answers_as_the_door_for_the_requester_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock()
    em = start_emulator(tmp_path / "em", clock, fee_rate=Decimal("0.3"))
    market = start_market(tmp_path / "market", clock=clock, mode="prod")
    try:
        monkeypatch.delenv("PROLIFIC_TOKEN", raising=False)
        with pytest.raises(DoorStartError, match="PROLIFIC_TOKEN"):
            serve_door(market, tmp_path / "market")
        monkeypatch.setenv("PROLIFIC_TOKEN", em.token)
        monkeypatch.setenv("PROLIFIC_BASE_URL", em.base_url)
        with pytest.raises(DoorStartError, match="needs --door-db"):
            serve_door(market, tmp_path / "market", config="campaigns.yaml")
        close = serve_door(market, tmp_path / "market")
        try:
            creds = market.credentials
            door = RemoteDoor(market.endpoint_url, creds.access_key_id, creds.secret_access_key)
            local = market.core.site.mounted()["/prolific/"]
            door.add_seat(StudySeat("0" * 24, "T1", 5, "CODE1"), stage="T1")
            assert local.seat("0" * 24) == StudySeat("0" * 24, "T1", 5, "CODE1")  # type: ignore[attr-defined]
            assert door.seat("0" * 24) == StudySeat("0" * 24, "T1", 5, "CODE1") and door.seat("2" * 24) is None
            assert door.served_counts("0" * 24) == {} and door.submissions() == [] and door.assignments_of("x") == []
            assert door.submission_of("nothing") is None and door.release("x") == []
            person = add_participant(em.root_url, em.token, country="GB", languages=["English"])
            assert door.could_serve("0" * 24, [person.id])  # a participant the site never saw could take anything
            # the participants' side is the door's own pages on the worker site
            status, _, _ = open_url("GET", f"{market.endpoint_url}/prolific/start?PROLIFIC_PID=x&STUDY_ID=y&SESSION_ID=z", {}, None, 10)
            assert status == 403
            # without the requester's secret: refused, nothing written
            wrong = RemoteDoor(market.endpoint_url, creds.access_key_id, "not-the-secret")
            with pytest.raises(RemoteDoorError, match="refused AddSeat"):
                wrong.add_seat(StudySeat("1" * 24, "T2", 5, "CODE2"), stage="T2")
            assert local.seat("1" * 24) is None  # type: ignore[attr-defined]
            body = json.dumps({}).encode()
            url = market.endpoint_url + "/"
            headers = sign_headers(url, body, {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "ProlificDoor.Nothing"},
                                   creds.access_key_id, creds.secret_access_key)
            status, _, raw = open_url("POST", url, headers, body, 10)
            assert status == 400 and b"no door operation" in raw
        finally:
            close()
        assert market.core.door_ops is None
    finally:
        market.stop()
        em.stop()
