"""The emulator's answers to what a researcher's own tools call beyond the campaign's client: messages to
participants, invitations to a workspace, filter sets, the filter catalogue and the eligibility count.

Shapes and rules as Prolific's API description has them: a message goes to a participant who took part
in the researcher's study (one channel per pair), listing needs `user_id=` or `created_after=` (at most
30 days back); a filter set has versions (an edit makes the next one, a locked set refuses edits) and
a study may take its filters from one (`filter_set_id`, `filter_set_version`).
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from campaign.clock import Clock
from campaign.prolific.emulator import catalogue
from campaign.prolific.emulator.common import ApiError, iso, new_id, not_found
from campaign.prolific.emulator.store import DocStore

INVITATION_ROLES = ("WORKSPACE_ADMIN", "WORKSPACE_COLLABORATOR")
MESSAGE_DAYS = 30


def _channel(a: str, b: str) -> str:
    return hashlib.sha256("|".join(sorted((a, b))).encode()).hexdigest()[:24]


def _text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ApiError(400, {key: ["This field is required."]})
    return value


class ResearcherTools:
    db: DocStore
    clock: Clock

    # provided by `Emulator`
    def _workspace(self, user: dict[str, Any], ws_id: str) -> dict[str, Any]: raise NotImplementedError
    def study(self, user: dict[str, Any], study_id: str) -> dict[str, Any]: raise NotImplementedError
    def group(self, user: dict[str, Any], group_id: str) -> dict[str, Any]: raise NotImplementedError
    def check_filters(self, filters: Any) -> list[dict[str, Any]]: raise NotImplementedError
    def eligible(self, p: dict[str, Any], study: dict[str, Any]) -> bool: raise NotImplementedError

    # -- messages ----------------------------------------------------------------------------------------
    def _took_part(self, study_id: str, participant_id: str) -> bool:
        return any(s["participant_id"] == participant_id for s in self.db.children("submission", study_id))

    def _message(self, sender: str, recipient: str, body: str, study_id: str | None, owner: str) -> None:
        self.db.put("message", {"id": new_id(), "sender_id": sender, "recipient_id": recipient, "body": body,
                                "sent_at": self.clock.now(), "channel_id": _channel(sender, recipient),
                                "study_id": study_id, "read": False}, owner=owner)

    def send_messages(self, user: dict[str, Any], body: dict[str, Any], recipients: list[str] | None = None) -> None:
        """`POST /messages/` (one `recipient_id`) and `/messages/bulk/` (`ids`): each must have taken part
        in the study named, which must be the researcher's."""
        text = _text(body, "body")
        study = self.study(user, _text(body, "study_id"))
        ids = recipients if recipients is not None else [_text(body, "recipient_id")]
        strangers = [str(p) for p in ids if not isinstance(p, str) or not self._took_part(study["id"], p)]
        if not ids or strangers:
            raise ApiError(400, {"recipient_id": [f"not a participant of this study: {', '.join(strangers) or '(none given)'}"]})
        for pid in ids:
            self._message(user["id"], pid, text, study["id"], user["id"])

    def send_bulk_messages(self, user: dict[str, Any], body: dict[str, Any]) -> None:
        ids = body.get("ids")
        if not isinstance(ids, list):
            raise ApiError(400, {"ids": ["This field is required."]})
        self.send_messages(user, body, ids)

    def send_group_message(self, user: dict[str, Any], body: dict[str, Any]) -> None:
        text = _text(body, "body")
        group = self.group(user, _text(body, "participant_group_id"))
        study_id = self.study(user, str(body["study_id"]))["id"] if body.get("study_id") else None
        for pid in group["members"]:
            self._message(user["id"], pid, text, study_id, user["id"])

    def list_messages(self, user: dict[str, Any], query: dict[str, str], unread: bool = False) -> list[dict[str, Any]]:
        """The researcher's messages with one user (`user_id=`), or all since `created_after=` (ISO 8601,
        at most 30 days back); `unread` lists those sent to the researcher not read yet (without marking)."""
        now = self.clock.now()
        since = now - MESSAGE_DAYS * 86400.0
        other = query.get("user_id")
        if not unread:
            if not other and not query.get("created_after"):
                raise ApiError(400, {"user_id": ["Give user_id or created_after."]})
            if query.get("created_after"):
                try:
                    since = max(since, datetime.fromisoformat(query["created_after"].replace("Z", "+00:00")).timestamp())
                except ValueError:
                    raise ApiError(400, {"created_after": ["Enter a valid ISO 8601 date-time."]}) from None
        excluded = set(filter(None, (query.get("excluded_sender_ids") or "").split(",")))
        out = []
        for m in self.db.owned("message", user["id"]):
            if m["sent_at"] < since or m["sender_id"] in excluded:
                continue
            if other and other not in (m["sender_id"], m["recipient_id"]):
                continue
            if unread and (m["read"] or m["recipient_id"] != user["id"]):
                continue
            out.append({"id": m["id"], "sender_id": m["sender_id"], "body": m["body"], "sent_at": iso(m["sent_at"]),
                        "type": "message", "channel_id": m["channel_id"],
                        "data": {"study_id": m["study_id"]} if m["study_id"] else {}})
        return out

    def participant_message(self, p: dict[str, Any], body: dict[str, Any]) -> None:
        """A participant writing to the researcher of a study they took part in (the side channel)."""
        text = _text(body, "body")
        study = self.db.get("study", _text(body, "study_id"))
        if study is None or not self._took_part(study["id"], p["id"]):
            raise ApiError(400, {"study_id": ["You did not take part in this study."]})
        self._message(p["id"], study["owner"], text, study["id"], study["owner"])

    # -- invitations -------------------------------------------------------------------------------------
    def invite(self, user: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        ws = self._workspace(user, _text(body, "association"))
        emails = body.get("emails")
        if not isinstance(emails, list) or not emails or not all(isinstance(e, str) and "@" in e for e in emails):
            raise ApiError(400, {"emails": ["Give a list of email addresses."]})
        role = body.get("role") or "WORKSPACE_COLLABORATOR"
        if role not in INVITATION_ROLES:
            raise ApiError(400, {"role": [f'"{role}" is not a valid choice.']})
        out = []
        for email in emails:
            inv = {"id": new_id(), "association": ws["id"], "invitee": {"id": None, "name": None, "email": email},
                   "invited_by": user["id"], "status": "INVITED", "role": role}
            inv["invite_link"] = f"https://app.prolific.com/invitations/{inv['id']}"
            self.db.put("invitation", inv, parent=ws["id"], owner=user["id"])
            out.append({k: v for k, v in inv.items() if k != "id"})
        return {"invitations": out}

    # -- the filter catalogue and filter sets ------------------------------------------------------------------
    def filter_listing(self, user: dict[str, Any], query: dict[str, str]) -> list[dict[str, Any]]:
        """`GET /filters/`; with `workspace_id` the id filters list that workspace's groups and studies."""
        id_choices: dict[str, dict[str, str]] = {}
        if query.get("workspace_id"):
            ws = self._workspace(user, query["workspace_id"])
            groups = {g["id"]: g["name"] for g in self.db.owned("group", user["id"])
                      if g["workspace_id"] == ws["id"] and not g["is_deleted"]}
            studies = {s["id"]: s.get("internal_name") or s["name"] for s in self.db.owned("study", user["id"])
                       if s["workspace"] == ws["id"]}
            for fid, kind in catalogue.ID_FILTERS.items():
                id_choices[fid] = groups if kind == "ParticipantGroupID" else studies if kind == "StudyID" else {}
        return catalogue.listing(id_choices)

    def eligibility_count(self, user: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        if "filters" not in body:
            raise ApiError(400, {"filters": ["This field is required."]})
        if body.get("workspace_id"):
            self._workspace(user, str(body["workspace_id"]))
        probe = {"filters": self.check_filters(body["filters"])}
        return {"count": sum(1 for p in self.db.all("participant") if self.eligible(p, probe))}

    def _filter_set(self, user: dict[str, Any], set_id: str) -> dict[str, Any]:
        fs = self.db.get("filter_set", set_id)
        if fs is None or fs["owner"] != user["id"] or fs["is_deleted"]:
            raise not_found("Filter set")
        return fs

    def filter_set_out(self, fs: dict[str, Any], version: int | None = None) -> dict[str, Any]:
        v = fs["versions"][str(version or fs["version"])]
        count = sum(1 for p in self.db.all("participant") if self.eligible(p, {"filters": v["filters"]}))
        return {"id": fs["id"], "version": version or fs["version"], "is_deleted": fs["is_deleted"], "is_locked": fs["is_locked"],
                "workspace_id": fs["workspace_id"], "organisation_id": None, "name": v["name"], "filters": v["filters"],
                "eligible_participant_count": count}

    def create_filter_set(self, user: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        ws = self._workspace(user, _text(body, "workspace_id"))
        name = _text(body, "name")
        filters = self.check_filters(body.get("filters") or [])
        fs = {"id": new_id(), "owner": user["id"], "workspace_id": ws["id"], "version": 1, "is_deleted": False,
              "is_locked": False, "versions": {"1": {"name": name, "filters": filters}}}
        self.db.put("filter_set", fs, parent=ws["id"], owner=user["id"])
        return self.filter_set_out(fs)

    def list_filter_sets(self, user: dict[str, Any], query: dict[str, str]) -> list[dict[str, Any]]:
        ws_id = query.get("workspace_id")
        return [self.filter_set_out(fs) for fs in self.db.owned("filter_set", user["id"])
                if not fs["is_deleted"] and (not ws_id or fs["workspace_id"] == ws_id)]

    def get_filter_set(self, user: dict[str, Any], set_id: str, query: dict[str, str]) -> dict[str, Any]:
        fs = self._filter_set(user, set_id)
        version = query.get("version_number")
        if version is not None and version not in fs["versions"]:
            raise ApiError(400, {"version_number": [f"filter set {set_id} has no version {version}."]})
        return self.filter_set_out(fs, int(version) if version else None)

    def update_filter_set(self, user: dict[str, Any], set_id: str, body: dict[str, Any]) -> dict[str, Any]:
        fs = self._filter_set(user, set_id)
        if fs["is_locked"]:
            raise ApiError(400, "This filter set is locked: unlock it to edit.")
        current = fs["versions"][str(fs["version"])]
        name = _text(body, "name") if "name" in body else current["name"]
        filters = self.check_filters(body["filters"]) if "filters" in body else current["filters"]
        fs["version"] += 1
        fs["versions"][str(fs["version"])] = {"name": name, "filters": filters}
        self.db.put("filter_set", fs)
        return self.filter_set_out(fs)

    def delete_filter_set(self, user: dict[str, Any], set_id: str) -> None:
        fs = self._filter_set(user, set_id)
        fs["is_deleted"] = True
        self.db.put("filter_set", fs)

    def clone_filter_set(self, user: dict[str, Any], set_id: str, body: dict[str, Any]) -> dict[str, Any]:
        fs = self._filter_set(user, set_id)
        current = fs["versions"][str(fs["version"])]
        name = _text(body, "new_name") if body.get("new_name") is not None else f"{current['name']} (copy)"
        return self.create_filter_set(user, {"workspace_id": fs["workspace_id"], "name": name, "filters": current["filters"]})

    def lock_filter_set(self, user: dict[str, Any], set_id: str, locked: bool) -> dict[str, Any]:
        fs = self._filter_set(user, set_id)
        fs["is_locked"] = locked
        self.db.put("filter_set", fs)
        return self.filter_set_out(fs)

    def filter_set_filters(self, user: dict[str, Any], set_id: str, version: Any) -> list[dict[str, Any]]:
        """The filters a study takes from a filter set (its latest version unless one is named)."""
        fs = self._filter_set(user, set_id)
        key = str(version if version is not None else fs["version"])
        if key not in fs["versions"]:
            raise ApiError(400, {"filter_set_version": [f"filter set {set_id} has no version {key}."]})
        return list(fs["versions"][key]["filters"])
