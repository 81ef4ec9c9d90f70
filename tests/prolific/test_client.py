"""The Prolific client through a full study life cycle, on the emulator (or real Prolific when asked)."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from decimal import Decimal
from typing import Any

import pytest

from campaign.prolific.client import ProlificClient, ProlificError
from campaign.prolific.emulator.participant import ParticipantError, add_participant
from campaign.prolific.emulator.server import start_emulator
from tests.prolific.support import LIVE, Api

pytestmark = pytest.mark.prolific

CODE = "C0MPL3TE"
REASON = ("Your answers did not follow the instructions: every attention check in this task was failed and "
          "the ratings were constant across all items.")


def study_fields(**over: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "name": "Rate the importance of statements", "internal_name": "campaign-test",
        "description": "Read short statements and rate how important each is.",
        "external_study_url": "https://tasks.example.org/prolific?PROLIFIC_PID={{%PROLIFIC_PID%}}"
                              "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}",
        "prolific_id_option": "url_parameters",
        "completion_codes": [{"code": CODE, "code_type": "COMPLETED", "actions": [{"action": "MANUALLY_REVIEW"}]}],
        "total_available_places": 2, "estimated_completion_time": 5, "reward": 100, "device_compatibility": ["desktop"],
    }
    fields.update(over)
    return fields


def test_token_check_and_repr_hide_the_token(api: Api) -> None:
    me = api.client.me()
    assert me["id"] and "email" in me
    assert "Token" not in repr(api.client) and (api.emulator is None or api.emulator.token not in repr(api.client))


def test_bad_or_missing_token_gets_a_wrapped_401(api: Api) -> None:
    em = api.need_emulator()
    with pytest.raises(ProlificError) as bad:
        ProlificClient(em.base_url, "not-a-token", max_retries=0).me()
    assert bad.value.status == 401
    try:
        urllib.request.urlopen(em.base_url + "users/me")
    except urllib.error.HTTPError as exc:
        assert exc.code == 401
        assert json.loads(exc.read())["error"]["status"] == 401


def test_draft_study_edit_and_delete(api: Api) -> None:
    study = api.client.create_study(study_fields())
    try:
        assert study["status"] == "UNPUBLISHED" and len(study["id"]) == 24
        assert api.client.update_study(study["id"], reward=120)["reward"] == 120
        # trailing slash optional: both forms answer
        assert api.client.request("GET", f"studies/{study['id']}")["id"] == study["id"]
    finally:
        api.client.delete_study(study["id"])
    with pytest.raises(ProlificError) as gone:
        api.client.study(study["id"])
    assert gone.value.status == 400 and gone.value.title == "Not found"  # the description lists 400 for its errors


def test_missing_fields_are_named(api: Api) -> None:
    with pytest.raises(ProlificError) as err:
        api.client.create_study({"name": "x"})
    assert err.value.status == 400
    assert "external_study_url" in err.value.detail and "reward" in err.value.detail


def test_full_life_cycle_money_and_transitions(api: Api) -> None:
    em = api.need_emulator()
    study = api.client.create_study(study_fields())
    sid = study["id"]
    assert api.client.transition_study(sid, "PUBLISH")["status"] == "ACTIVE"
    with pytest.raises(ProlificError):
        api.client.update_study(sid, reward=50)  # not editable once published
    with pytest.raises(ProlificError):
        api.client.update_study(sid, total_available_places=1)  # places only grow
    alice = add_participant(em.root_url, em.token)
    bob = add_participant(em.root_url, em.token)
    assert [s["id"] for s in alice.studies()] == [sid]
    a_sub, url = alice.start(sid)
    assert f"PROLIFIC_PID={alice.id}" in url and f"STUDY_ID={sid}" in url and f"SESSION_ID={a_sub}" in url
    with pytest.raises(ParticipantError):
        alice.start(sid)  # one submission per participant by default
    with pytest.raises(ParticipantError) as other:
        bob.complete(a_sub, CODE)  # another participant's submission
    assert other.value.status == 404
    assert alice.complete_from_redirect(a_sub, f"https://app.prolific.com/submissions/complete?cc={CODE}") == "AWAITING REVIEW"
    b_sub, _ = bob.start(sid)
    assert bob.complete(b_sub, CODE) == "AWAITING REVIEW"
    assert api.client.study(sid)["status"] == "AWAITING REVIEW"  # every place finished
    assert api.client.submission_counts(sid)["AWAITING REVIEW"] == 2

    api.client.approve(a_sub)
    api.client.approve(a_sub)  # final: a repeat is ignored, and pays nothing more
    with pytest.raises(ValueError):
        api.client.reject(b_sub, "too short", "LOW_EFFORT")
    with pytest.raises(ProlificError):
        api.client.request("POST", f"submissions/{b_sub}/transition/", {"action": "REJECT", "message": REASON,
                                                                        "rejection_category": "NOT_A_CATEGORY"})
    api.client.reject(b_sub, REASON, "LOW_EFFORT")
    assert api.client.study(sid)["status"] == "ACTIVE"  # the rejected place is recruited again
    cost = api.client.study_cost(sid)["rewards"]
    # reward 100, fee 33.3% -> 33, VAT 20% of the fee -> 7: charged once, for the approved submission only
    assert (cost["rewards"]["amount"], cost["fees"]["amount"], cost["tax"]["amount"]) == (100, 33, 7)
    assert api.client.cost(100, 2) == 280

    carol = add_participant(em.root_url, em.token)
    c_sub, _ = carol.start(sid)
    carol.complete(c_sub, CODE)
    api.client.bulk_approve([c_sub])
    assert api.client.study(sid)["status"] == "COMPLETED"


def test_bonus_pay_is_not_idempotent_and_is_visible_on_the_submission(api: Api) -> None:
    em = api.need_emulator()
    sid = api.client.create_study(study_fields(total_available_places=1))["id"]
    api.client.transition_study(sid, "PUBLISH")
    p = add_participant(em.root_url, em.token)
    sub, _ = p.start(sid)
    p.complete(sub, CODE)
    api.client.approve(sub)
    with pytest.raises(ProlificError):
        api.client.create_bonus(sid, [("0" * 24, Decimal("0.10"))])  # did not take part
    batch = api.client.create_bonus(sid, [(p.id, Decimal("0.25"))])
    assert (batch["amount"], batch["fees"], batch["vat"]) == (25, 8, 2)
    assert api.client.submission(sub)["bonus_payments"] == []  # creating does not pay
    api.client.pay_bonus(batch["id"])
    assert api.client.submission(sub)["bonus_payments"] == [25]
    api.client.pay_bonus(batch["id"])  # Prolific pays again: the caller must guard against this
    assert api.client.submission(sub)["bonus_payments"] == [25, 25]
    assert api.client.study_cost(sid)["bonuses"]["rewards"]["amount"] == 50


def test_block_list_group_and_approval_filter(api: Api) -> None:
    em = api.need_emulator()
    ws = api.client.me()
    workspace = api.client.workspaces()[0]["id"]
    good = add_participant(em.root_url, em.token, approval_rate=99)
    blocked = add_participant(em.root_url, em.token, approval_rate=99)
    weak = add_participant(em.root_url, em.token, approval_rate=80)
    group = api.client.create_group("campaign block list", workspace, [blocked.id])
    assert api.client.group_members(group["id"]) == [blocked.id]
    sid = api.client.create_study(study_fields(filters=[
        {"filter_id": "participant_group_blocklist", "selected_values": [group["id"]]},
        {"filter_id": "approval_rate", "selected_range": {"lower": 95, "upper": 100}}]))["id"]
    api.client.transition_study(sid, "PUBLISH")
    assert [s["id"] for s in good.studies()] == [sid]
    assert blocked.studies() == [] and weak.studies() == []
    with pytest.raises(ParticipantError) as refused:
        blocked.start(sid)
    assert refused.value.status == 403
    api.client.remove_from_group(group["id"], [blocked.id])
    assert [s["id"] for s in blocked.studies()] == [sid]
    assert ws["id"]


def test_time_out_reopens_the_place(api: Api) -> None:
    em = api.need_emulator()
    assert api.clock is not None
    sid = api.client.create_study(study_fields(total_available_places=1))["id"]
    api.client.transition_study(sid, "PUBLISH")
    slow, fast = add_participant(em.root_url, em.token), add_participant(em.root_url, em.token)
    sub, _ = slow.start(sid)
    assert fast.studies() == []  # the only place is taken
    api.clock.advance(60 * api.client.study(sid)["maximum_allowed_time"] + 1)
    assert slow.submission(sub)["status"] == "TIMED-OUT"
    assert [s["id"] for s in fast.studies()] == [sid]
    with pytest.raises(ParticipantError):
        slow.complete(sub, CODE)


@pytest.mark.skipif(LIVE, reason="restarts the emulator; nothing to restart on real Prolific")
def test_state_and_token_survive_a_restart(tmp_path: Any) -> None:
    em = start_emulator(tmp_path / "p")
    sid = ProlificClient(em.base_url, em.token).create_study(study_fields())["id"]
    token = em.token
    em.stop()
    again = start_emulator(tmp_path / "p")
    try:
        assert again.token == token
        assert ProlificClient(again.base_url, token).study(sid)["status"] == "UNPUBLISHED"
        assert oct((tmp_path / "p" / "token").stat().st_mode & 0o777) == "0o600"
    finally:
        again.stop()


def test_truncated_and_malformed_bodies_change_nothing(api: Api) -> None:
    em = api.need_emulator()
    host, port = em.httpd.server_address[:2]
    body = json.dumps(study_fields()).encode()
    with socket.create_connection((host, port)) as s:
        s.sendall(b"POST /api/v1/studies/ HTTP/1.1\r\nHost: x\r\nAuthorization: Token " + em.token.encode()
                  + b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body) + 50).encode()
                  + b"\r\nConnection: close\r\n\r\n" + body)
        s.shutdown(socket.SHUT_WR)
        reply = s.recv(4096)
    assert reply.startswith(b"HTTP/1.1 400")
    for raw in (b"{not json", b"[" * 100000):
        req = urllib.request.Request(em.base_url + "studies/", data=raw, method="POST")
        req.add_header("Authorization", "Token " + em.token)
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req)
        assert err.value.code == 400
    assert api.client.studies() == []
