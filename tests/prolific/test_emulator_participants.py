"""The emulator's operator side channel: a participant the operator names (`external_id`) is the same
person on every later call, so a restarted simulated crowd finds its participants again."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from campaign.prolific.emulator.catalogue import country_choice
from campaign.prolific.emulator.participant import Participant, ParticipantError, add_participant
from campaign.prolific.emulator.server import start_emulator

pytestmark = pytest.mark.prolific


def _post(url: str, body: dict[str, Any], auth: str | None) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **({"Authorization": auth} if auth else {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(json.loads(resp.read()))
    except urllib.error.HTTPError as exc:
        return exc.code, dict(json.loads(exc.read()))


def test_external_id_finds_the_same_participant_with_a_new_secret(tmp_path: Path) -> None:
    em = start_emulator(tmp_path / "em")
    url = f"{em.root_url}/emulator/participants"
    try:
        status, first = _post(url, {"external_id": "sim:A1", "country": "GB"}, "Token " + em.token)
        assert status == 201 and first["created"] is True
        status, again = _post(url, {"external_id": "sim:A1", "country": "US", "approval_rate": 90}, "Token " + em.token)
        assert status == 200 and again["created"] is False and again["id"] == first["id"]
        assert again["secret"] != first["secret"]
        with pytest.raises(ParticipantError) as old:
            Participant(em.root_url, first["id"], first["secret"]).studies()
        assert old.value.status == 401  # the old secret stops working
        assert Participant(em.root_url, again["id"], again["secret"]).studies() == []
        p = em.emulator.db.get("participant", first["id"])
        assert p is not None and p["country"] == country_choice("US") and p["approval_rate"] == 90  # profile updated
        other = add_participant(em.root_url, em.token, external_id="sim:A2")
        anonymous = add_participant(em.root_url, em.token)
        assert len({first["id"], other.id, anonymous.id}) == 3
        assert len(em.emulator.db.all("participant")) == 3
    finally:
        em.stop()
    again_em = start_emulator(tmp_path / "em")  # the mapping lives in the emulator's state
    try:
        assert add_participant(again_em.root_url, again_em.token, external_id="sim:A1").id == first["id"]
    finally:
        again_em.stop()


def test_only_the_operator_names_participants(tmp_path: Path) -> None:
    em = start_emulator(tmp_path / "em")
    url = f"{em.root_url}/emulator/participants"
    try:
        status, body = _post(url, {"external_id": "sim:A1"}, None)
        assert status == 401 and "error" in body
        status, body = _post(url, {"external_id": "sim:A1"}, "Token not-the-token")
        assert status == 401
        for bad in ("", 7, "x" * 201):
            status, body = _post(url, {"external_id": bad}, "Token " + em.token)
            assert status == 400 and "external_id" in json.dumps(body)
        p = add_participant(em.root_url, em.token, external_id="sim:A1")
        status, _ = _post(url, {"external_id": "sim:A1"}, f"Participant {p.id}:{p._auth.rsplit(':', 1)[1]}")
        assert status == 401  # a participant's own credentials cannot reset anyone's secret
        assert em.emulator.db.all("participant") and len(em.emulator.db.all("participant")) == 1
    finally:
        em.stop()
