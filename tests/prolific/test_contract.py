"""Prolific's API description is the contract: every request the project's client can send is checked
against the operation's request schema in `openapi.yml`, and every emulator answer against its response
schema (`tests/prolific/contract.py`). So is what a researcher's own tools commonly call beyond the
client: messages, participant groups and invitations, workspaces and projects, filter sets.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from campaign.clock import ManualClock
from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.participant import Participant, add_participant
from campaign.prolific.emulator.server import RunningEmulator, start_emulator
from campaign.prolific.study import ProlificConfig, study_body
from tests.prolific.contract import Contract, contract, observer

pytestmark = pytest.mark.prolific

REASON = ("Your answers did not follow the instructions: every attention check in this task was failed and "
          "the ratings were constant across all items.")
CFG = ProlificConfig(public_url="https://tasks.example.org", bundle=2, estimated_minutes=10, reward=Decimal("1.50"),
                     countries=("GB", "US"), languages=("English",))


@dataclass
class Checked:
    em: RunningEmulator
    client: ProlificClient
    contract: Contract
    clock: ManualClock

    def person(self, **profile: Any) -> Participant:
        return add_participant(self.em.root_url, self.em.token, **profile)

    def ok(self) -> None:
        assert not self.contract.violations, "answers or requests outside Prolific's description:\n" + self.contract.report()


@pytest.fixture
def checked(tmp_path: Path) -> Iterator[Checked]:
    c = contract()  # skips, saying why, where the description is absent
    clock = ManualClock()
    em = start_emulator(tmp_path / "em", clock, fee_rate=Decimal("0.3"), vat_rate=Decimal("0.2"))
    em.app.observers.append(observer(c))
    try:
        yield Checked(em, ProlificClient(em.base_url, em.token, max_retries=0), c, clock)
    finally:
        em.stop()


class Recording:
    """The client, noting which of its public methods were called."""

    def __init__(self, api: ProlificClient) -> None:
        self.api, self.called = api, set[str]()

    def __getattr__(self, name: str) -> Any:
        self.called.add(name)
        return getattr(self.api, name)


def client_methods() -> set[str]:
    return {n for n, f in inspect.getmembers(ProlificClient, inspect.isfunction) if not n.startswith("_")} - {"request", "pages"}


def test_every_client_call_and_its_answer_follow_the_description(checked: Checked) -> None:
    api = Recording(checked.client)
    assert api.clone().calls == 0
    me = api.me()
    ws = api.workspaces()[0]["id"]
    api.balance(ws)
    other = api.create_workspace("Second workspace", "GBP")["id"]
    project = api.create_project(other, "Ratings")["id"]
    assert [p["id"] for p in api.projects(other)] == [project]
    block = api.create_group("Block list", ws)["id"]
    api.add_to_group(block, ["5f0c1e2d3b4a59687a6b5c4d"])
    api.remove_from_group(block, ["5f0c1e2d3b4a59687a6b5c4d"])
    assert api.group_members(block) == []
    assert block in [g["id"] for g in api.groups(ws)]
    body = study_body(CFG, name="Rate statements", description="Rate how important statements are.",
                      internal_name="campaign:s1:abc", places=2, completion_code="CABC", seat="s1", project_id=project,
                      block_group_id=block, catalogue=api.filters())
    draft = api.create_study(body)
    api.update_study(draft["id"], reward=160)
    api.delete_study(draft["id"])
    study = api.create_study(body)
    sid = study["id"]
    api.transition_study(sid, "PUBLISH")
    assert sid in [s["id"] for s in api.studies()] and sid in [s["id"] for s in api.project_studies(project)]
    api.update_study(sid, total_available_places=3)
    people = [checked.person(country="GB", languages=["English"]) for _ in range(3)]
    subs = []
    for p in people:
        sub, _url = p.start(sid)
        p.complete(sub, "CABC")
        subs.append(sub)
    assert {s["id"] for s in api.submissions(sid)} == set(subs)
    api.submission(subs[0])
    assert api.request_return(subs[0], ["Didn't finish the study"])["return_requested"]
    api.approve(subs[0])
    api.reject(subs[1], REASON, "FAILED_CHECK")
    api.bulk_approve([subs[2]])
    batch = api.create_bonus(sid, [(subs[0], Decimal("0.40"))])
    api.pay_bonus(batch["id"])
    api.submission_counts(sid)
    api.study_cost(sid)
    assert api.cost(150, 2) > 300
    api.eligible_count(body["filters"])
    api.transition_study(sid, "STOP")
    api.study(sid)
    api.delete_group(block)
    # webhooks: a secret, a subscription confirmed with its X-Hook-Secret, its events, then gone
    assert "submission.status.change" in api.event_types()
    assert api.hook_secrets(ws) == []
    api.create_hook_secret(ws)
    assert len(api.hook_secrets(ws)) == 1
    hook, confirm = api.create_subscription(ws, "submission.status.change", "https://tasks.example.org/prolific/hooks")
    assert confirm and hook["is_enabled"] is False
    assert api.subscriptions(ws) == [] and [h["id"] for h in api.subscriptions(ws, enabled=False)] == [hook["id"]]
    assert api.confirm_subscription(hook["id"], confirm)["is_enabled"] is True
    assert api.subscription(hook["id"])["target_url"].endswith("/prolific/hooks")
    api.update_subscription(hook["id"], is_enabled=True)
    assert api.subscription_events(hook["id"]) == []
    api.delete_subscription(hook["id"])
    assert me["id"]
    assert client_methods() <= api.called, f"client calls not exercised here: {client_methods() - api.called}"
    checked.ok()


TOOLS_OPERATIONS = {
    ("GET", "/api/v1/users/me/"), ("GET", "/api/v1/workspaces/"), ("POST", "/api/v1/workspaces/"),
    ("GET", "/api/v1/workspaces/{workspace_id}/"), ("PATCH", "/api/v1/workspaces/{workspace_id}/"),
    ("GET", "/api/v1/workspaces/{workspace_id}/balance/"), ("GET", "/api/v1/workspaces/{workspace_id}/projects/"),
    ("POST", "/api/v1/workspaces/{workspace_id}/projects/"), ("GET", "/api/v1/projects/{project_id}/"),
    ("PATCH", "/api/v1/projects/{project_id}/"), ("GET", "/api/v1/projects/{project_id}/studies/"),
    ("POST", "/api/v1/invitations/"),
    ("POST", "/api/v1/participant-groups/"), ("GET", "/api/v1/participant-groups/"),
    ("GET", "/api/v1/participant-groups/{id}/"), ("PATCH", "/api/v1/participant-groups/{id}/"),
    ("DELETE", "/api/v1/participant-groups/{id}/"), ("GET", "/api/v1/participant-groups/{id}/participants/"),
    ("POST", "/api/v1/participant-groups/{id}/participants/"), ("DELETE", "/api/v1/participant-groups/{id}/participants/"),
    ("POST", "/api/v1/messages/"), ("POST", "/api/v1/messages/bulk/"), ("POST", "/api/v1/messages/participant-group/"),
    ("GET", "/api/v1/messages/"), ("GET", "/api/v1/messages/unread/"),
    ("GET", "/api/v1/filters/"), ("POST", "/api/v1/eligibility-count/"),
    ("GET", "/api/v1/filter-sets/"), ("POST", "/api/v1/filter-sets/"), ("GET", "/api/v1/filter-sets/{id}/"),
    ("PATCH", "/api/v1/filter-sets/{id}/"), ("DELETE", "/api/v1/filter-sets/{id}/"), ("POST", "/api/v1/filter-sets/{id}/clone/"),
    ("POST", "/api/v1/filter-sets/{id}/lock/"), ("POST", "/api/v1/filter-sets/{id}/unlock/"),
    ("POST", "/api/v1/studies/"), ("DELETE", "/api/v1/studies/{id}/"), ("DELETE", "/api/v1/projects/{project_id}/studies/{study_id}/"),
}
HOOK_OPERATIONS = {
    ("GET", "/api/v1/hooks/event-types/"), ("GET", "/api/v1/hooks/secrets/"), ("POST", "/api/v1/hooks/secrets/"),
    ("GET", "/api/v1/hooks/subscriptions/"), ("POST", "/api/v1/hooks/subscriptions/"),
    ("GET", "/api/v1/hooks/subscriptions/{subscription_id}/"), ("POST", "/api/v1/hooks/subscriptions/{subscription_id}/"),
    ("PATCH", "/api/v1/hooks/subscriptions/{subscription_id}/"), ("DELETE", "/api/v1/hooks/subscriptions/{subscription_id}/"),
    ("GET", "/api/v1/hooks/subscriptions/{subscription_id}/events/"),
}


def test_a_researchers_own_tools_get_answers_as_described(checked: Checked) -> None:
    """Messages, groups, invitations, workspaces (with PATCH), projects and filter sets, called the way a
    third-party client calls them: every request and answer follows the description."""
    r = checked.client.request
    me = r("GET", "users/me/")
    ws = r("POST", "workspaces/", {"title": "Lab", "currency_code": "GBP"})
    assert r("PATCH", f"workspaces/{ws['id']}/", {"id": ws["id"], "title": "Lab (renamed)"})["title"] == "Lab (renamed)"
    assert r("GET", f"workspaces/{ws['id']}/")["title"] == "Lab (renamed)"
    r("GET", f"workspaces/{ws['id']}/balance/")
    invited = r("POST", "invitations/", {"association": ws["id"], "emails": ["colleague@example.org"], "role": "WORKSPACE_COLLABORATOR"})
    assert invited["invitations"][0]["status"] == "INVITED"
    project = r("POST", f"workspaces/{ws['id']}/projects/", {"title": "Pilot"})
    assert project["type"] == "PRIVATE"
    assert r("PATCH", f"projects/{project['id']}/", {"title": "Pilot 2", "type": "PRIVATE"})["title"] == "Pilot 2"
    assert r("GET", f"workspaces/{ws['id']}/projects/")["results"][0]["type"] == "PRIVATE"
    r("GET", f"projects/{project['id']}/")
    # groups: listed by workspace or by project, never unfiltered; `active=false` shows the deleted ones
    people = [checked.person(country="GB", languages=["English"]) for _ in range(3)]
    group = r("POST", "participant-groups/", {"name": "Trusted", "workspace_id": ws["id"], "participant_ids": [people[0].id]})
    first_ws = r("GET", "workspaces/")["results"][0]["id"]
    assert first_ws != ws["id"] and me["id"]
    other = r("POST", "participant-groups/", {"name": "Elsewhere", "workspace_id": first_ws})
    listed = r("GET", "participant-groups/", query={"workspace_id": ws["id"]})["results"]
    assert [g["id"] for g in listed] == [group["id"]]
    assert [g["id"] for g in r("GET", "participant-groups/", query={"project_id": project["id"]})["results"]] == [group["id"]]
    r("PATCH", f"participant-groups/{group['id']}/", {"name": "Trusted people", "participant_ids": [people[0].id, people[1].id]})
    r("POST", f"participant-groups/{group['id']}/participants/", {"participant_ids": [people[2].id]})
    r("DELETE", f"participant-groups/{group['id']}/participants/", {"participant_ids": [people[1].id]})
    members = r("GET", f"participant-groups/{group['id']}/participants/")["results"]
    assert {m["participant_id"] for m in members} == {people[0].id, people[2].id}
    assert r("GET", f"participant-groups/{group['id']}/")["participant_count"] == 2
    r("DELETE", f"participant-groups/{other['id']}/")
    # filters and filter sets: names are looked up, ids are sent
    catalogue = r("GET", "filters/", query={"workspace_id": ws["id"]})["results"]
    uk = next(k for f in catalogue if f["filter_id"] == "current-country-of-residence" for k, v in f["choices"].items()
              if v == "United Kingdom")
    uk_only = [{"filter_id": "current-country-of-residence", "selected_values": [uk]}]
    assert r("POST", "eligibility-count/", {"filters": uk_only, "workspace_id": ws["id"]})["count"] == 3
    fs = r("POST", "filter-sets/", {"workspace_id": ws["id"], "name": "UK", "filters": uk_only})
    assert fs["version"] == 1 and fs["eligible_participant_count"] == 3
    assert r("PATCH", f"filter-sets/{fs['id']}/", {"name": "UK only"})["version"] == 2
    r("POST", f"filter-sets/{fs['id']}/lock/")
    with pytest.raises(Exception, match="locked"):
        r("PATCH", f"filter-sets/{fs['id']}/", {"name": "edited while locked"})
    r("POST", f"filter-sets/{fs['id']}/unlock/")
    assert r("GET", f"filter-sets/{fs['id']}/", query={"version_number": 1})["name"] == "UK"
    copy = r("POST", f"filter-sets/{fs['id']}/clone/", {"new_name": "UK copy"})
    assert {s["id"] for s in r("GET", "filter-sets/", query={"workspace_id": ws["id"]})["results"]} == {fs["id"], copy["id"]}
    r("DELETE", f"filter-sets/{copy['id']}/")
    # a study targeted by the filter set, which the people took part in: messages to them
    body = study_body(CFG, name="Rate statements", description="Rate how important statements are.", internal_name="x",
                      places=3, completion_code="CX", seat="s", project_id=project["id"], block_group_id=None,
                      catalogue=catalogue)
    body = {k: v for k, v in body.items() if k != "filters"} | {"filter_set_id": fs["id"]}
    study = r("POST", "studies/", body)
    assert study["filters"] == uk_only
    assert study["id"] in [s["id"] for s in r("GET", f"projects/{project['id']}/studies/")["results"]]
    r("POST", f"studies/{study['id']}/transition/", {"action": "PUBLISH"})
    for p in people:
        p.start(study["id"])
    r("POST", "messages/", {"recipient_id": people[0].id, "body": "Thank you for taking part.", "study_id": study["id"]})
    r("POST", "messages/bulk/", {"ids": [people[1].id, people[2].id], "body": "A reminder.", "study_id": study["id"]})
    r("POST", "messages/participant-group/", {"participant_group_id": group["id"], "body": "Hello group.", "study_id": study["id"]})
    people[0].message(study["id"], "A question about the task.")
    thread = r("GET", "messages/", query={"user_id": people[0].id})["results"]
    assert [m["body"] for m in thread] == ["Thank you for taking part.", "Hello group.", "A question about the task."]
    assert [m["body"] for m in r("GET", "messages/unread/")["results"]] == ["A question about the task."]
    assert len(r("GET", "messages/", query={"created_after": "1970-01-01T00:00:00Z"})["results"]) == 6
    stranger = checked.person()
    with pytest.raises(Exception, match="not a participant of this study"):
        r("POST", "messages/", {"recipient_id": stranger.id, "body": "Hi", "study_id": study["id"]})
    draft = r("POST", "studies/", body | {"internal_name": "draft"})
    r("DELETE", f"projects/{project['id']}/studies/{draft['id']}/")
    draft = r("POST", "studies/", body | {"internal_name": "draft 2"})
    assert r("DELETE", f"studies/{draft['id']}/") == {}
    missing = TOOLS_OPERATIONS - checked.contract.seen
    assert not missing, f"operations not exercised: {sorted(missing)}"
    checked.ok()


def test_the_checker_refuses_what_the_emulator_used_to_answer() -> None:
    """The shapes the old emulator answered, each outside the description (so these tests fail on it)."""
    c = contract()
    c.check("GET", "/api/v1/submissions/abc/", None, 200, {"id": "a", "study_id": "s", "status": "ACTIVE", "started_at": 1.7e9})
    c.check("GET", "/api/v1/workspaces/abc/projects/", None, 200, {"results": [{"id": "p", "title": "t"}]})
    c.check("DELETE", "/api/v1/studies/abc/", None, 204, None)
    c.check("GET", "/api/v1/studies/abc/", None, 404, {"error": {"status": 404, "error_code": 1, "title": "x", "detail": "d"}})
    c.check("GET", "/api/v1/participant-groups/", None, 200, {"results": []}, {})
    c.check("POST", "/api/v1/submissions/abc/transition/", {"action": "REJECT", "rejection_category": ["OTHER"]}, 200,
            {"id": "a", "study_id": "s", "status": "REJECTED", "started_at": "2026-01-01T00:00:00Z"})
    assert sorted({(v.path, v.where) for v in c.violations}) == [
        ("/api/v1/participant-groups/", "request"), ("/api/v1/studies/abc/", "response 204"),
        ("/api/v1/studies/abc/", "response 404"), ("/api/v1/submissions/abc/", "response 200"),
        ("/api/v1/submissions/abc/transition/", "request"), ("/api/v1/workspaces/abc/projects/", "response 200")]


def test_hook_operations_and_signed_deliveries_follow_the_description(checked: Checked) -> None:
    """Every `hooks/` operation as the description has it (a subscription disabled until confirmed with
    the `X-Hook-Secret` of its creation); a submission's status changes are POSTed to the target as
    `submission.status.change` events, signed base64(HMAC-SHA256(secret, timestamp + body)) with the
    workspace's secret, sent only after the change and tried again (bounded) while the target fails."""
    import base64
    import hashlib
    import hmac
    import json

    from campaign.prolific.emulator import hooks

    r = checked.client.request
    ws = r("GET", "workspaces/")["results"][0]["id"]
    assert [e["event_type"] for e in r("GET", "hooks/event-types/")["results"]] == ["submission.status.change"]
    with pytest.raises(Exception, match="secret"):  # a subscription needs the workspace's secret first
        r("POST", "hooks/subscriptions/", {"workspace_id": ws, "event_type": "submission.status.change",
                                            "target_url": "https://tasks.example.org/hooks"})
    r("POST", "hooks/secrets/", {"workspace_id": ws})
    secret = r("POST", "hooks/secrets/", {"workspace_id": ws})["value"]  # replaces the first one
    assert [s["value"] for s in r("GET", "hooks/secrets/", query={"workspace_id": ws})["results"]] == [secret]
    headers: dict[str, str] = {}
    created = r("POST", "hooks/subscriptions/", {"workspace_id": ws, "event_type": "submission.status.change",
                                                 "target_url": "https://tasks.example.org/hooks"}, answer_headers=headers)
    hook = created["results"][0]
    with pytest.raises(Exception, match="not the secret"):
        r("POST", f"hooks/subscriptions/{hook['id']}/", {"secret": "guessed"})
    assert r("POST", f"hooks/subscriptions/{hook['id']}/", {"secret": headers["x-hook-secret"]})["is_enabled"] is True
    assert [h["id"] for h in r("GET", "hooks/subscriptions/", query={"workspace_id": ws})["results"]] == [hook["id"]]
    r("GET", f"hooks/subscriptions/{hook['id']}/")
    body = study_body(CFG, name="Rate", description="Rate statements.", internal_name="h", places=2, completion_code="CH",
                      seat="s", project_id=None, block_group_id=None, catalogue=checked.client.filters())
    sid = checked.client.create_study(body)["id"]
    checked.client.transition_study(sid, "PUBLISH")
    sent: list[tuple[str, dict[str, str], bytes]] = []
    answers = [500, 200, 200, 200]
    checked.em.hooks.post = lambda url, h, b: (sent.append((url, h, b)), answers.pop(0) if answers else 200)[1]
    person = checked.person(country="GB", languages=["English"])
    sub, _url = person.start(sid)
    assert sent == []  # written with the change, sent afterwards
    assert checked.em.hooks.step() == 0  # the target answered 500: tried again later, not at once
    assert checked.em.hooks.step() == 0 and len(sent) == 1
    person.complete(sub, "CH")
    assert checked.em.hooks.step() == 1  # the completion now; the failed start waits for its back-off
    checked.clock.advance(hooks.RETRY_BASE)
    assert checked.em.hooks.step() == 1
    statuses = []
    for url, h, raw in sent:
        assert url == "https://tasks.example.org/hooks" and h["Content-Type"] == "application/json"
        stamp = h["X-Prolific-Request-Timestamp"]
        mac = hmac.new(secret.encode(), stamp.encode() + raw, hashlib.sha256).digest()
        assert hmac.compare_digest(h["X-Prolific-Request-Signature"], base64.b64encode(mac).decode())
        payload = json.loads(raw)
        assert raw == json.dumps(payload).encode()  # Python's default serialisation, as Prolific's sample verifies
        assert payload["event_type"] == "submission.status.change" and payload["resource_id"] == sub
        assert payload["participant_id"] == person.id and h["X-Event-ID"]
        statuses.append(payload["status"])
    assert statuses == ["ACTIVE", "AWAITING REVIEW", "ACTIVE"]
    events = r("GET", f"hooks/subscriptions/{hook['id']}/events/", query={"resource_id": sub})["results"]
    assert sorted(e["status"] for e in events) == ["SUCCEEDED", "SUCCEEDED"]
    assert r("GET", f"hooks/subscriptions/{hook['id']}/events/", query={"status": '["FAILED"]'})["results"] == []
    # a target that never answers is given up after MAX_ATTEMPTS tries
    checked.em.hooks.post = lambda url, h, b: (sent.append((url, h, b)), 503)[1]
    before = len(sent)
    checked.client.approve(sub)
    for _ in range(hooks.MAX_ATTEMPTS + 3):
        checked.em.hooks.step()
        checked.clock.advance(hooks.RETRY_BASE * 2 ** hooks.MAX_ATTEMPTS)
    assert len(sent) - before == hooks.MAX_ATTEMPTS
    assert [e["status"] for e in r("GET", f"hooks/subscriptions/{hook['id']}/events/", query={"status": "FAILED"})["results"]] \
        == ["FAILED"]
    assert r("PATCH", f"hooks/subscriptions/{hook['id']}/", {"is_enabled": False})["is_enabled"] is False
    assert r("GET", "hooks/subscriptions/", query={"is_enabled": "false"})["results"][0]["id"] == hook["id"]
    r("DELETE", f"hooks/subscriptions/{hook['id']}/")
    missing = HOOK_OPERATIONS - checked.contract.seen
    assert not missing, f"operations not exercised: {sorted(missing)}"
    checked.ok()
