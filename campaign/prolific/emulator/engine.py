"""What the Prolific emulator does: studies and their transitions, submissions, bonuses, groups, money.

Follows `shared/reference/prolific-api.md`: study statuses UNPUBLISHED -> ACTIVE <-> PAUSED -> AWAITING
REVIEW / COMPLETED with Prolific's automatic moves (all places finished -> AWAITING REVIEW; all reviewed
-> COMPLETED; a rejection or more places -> ACTIVE again), places that only grow once published,
submission statuses and their final transitions (repeats ignored), bulk approval, bonus batches whose
pay call is NOT idempotent (each call pays again, as on Prolific), participant groups as allow/block
filters, and money in minor units. Fee and VAT rates are settings: the real fee percentage could not
be confirmed.

Every method runs inside the server's one transaction per request; an `ApiError` rolls it back.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from campaign.clock import Clock
from campaign.prolific.emulator.store import DocStore

STUDY_STATUSES = ("UNPUBLISHED", "SCHEDULED", "PUBLISHING", "ACTIVE", "PAUSED", "AWAITING REVIEW", "COMPLETED")
REJECTION_CATEGORIES = frozenset({"TOO_QUICKLY", "TOO_SLOWLY", "FAILED_INSTRUCTIONS", "INCOMP_LONGITUDINAL", "FAILED_CHECK",
                                  "LOW_EFFORT", "MALINGERING", "NO_CODE", "BAD_CODE", "NO_DATA", "UNSUPP_DEVICE", "OTHER"})
TAKES_PLACE = frozenset({"RESERVED", "ACTIVE", "AWAITING REVIEW", "APPROVED", "PARTIALLY APPROVED", "SCREENED OUT"})
FINISHED = frozenset({"AWAITING REVIEW", "APPROVED", "PARTIALLY APPROVED", "SCREENED OUT"})
EDITABLE_AFTER_PUBLISH = frozenset({"internal_name", "total_available_places", "access_details", "submissions_config"})
DEVICES = frozenset({"desktop", "tablet", "mobile"})
REQUIRED_STUDY_FIELDS = ("name", "description", "external_study_url", "prolific_id_option", "total_available_places",
                         "estimated_completion_time", "reward")
# Filters the emulator evaluates. Country and language values are ISO codes here (Prolific's own
# catalogue uses choice ids, which are not public); ranges are inclusive.
RANGE_FILTERS = {"approval_rate": "approval_rate", "approval_numbers": "approvals", "age": "age"}
SELECT_FILTERS = {"current-country-of-residence": "country", "country": "country", "first-language": "languages",
                  "fluent-languages": "languages"}
ID_FILTERS = ("participant_group_allowlist", "participant_group_blocklist", "previous_studies_allowlist",
              "previous_studies_blocklist", "custom_allowlist", "custom_blocklist")
BULK_APPROVE_MAX = 1000
BONUS_LINES_MAX = 200


class ApiError(Exception):
    """An answer in Prolific's error shape: `{"error": {"status", "error_code", "title", "detail"}}`."""

    def __init__(self, status: int, detail: Any, title: str | None = None) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail
        self.title = title or {400: "Bad request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found",
                               405: "Method not allowed", 429: "Too many requests"}.get(status, "Error")

    def body(self) -> dict[str, Any]:
        return {"error": {"status": self.status, "error_code": self.status * 100, "title": self.title, "detail": self.detail}}


def new_id() -> str:
    return secrets.token_hex(12)  # Prolific ids are 24 hex characters


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def minor(value: Any, field: str) -> int:
    """A positive whole number of minor units (pence/cents); floats that are whole are accepted."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) or value < 0:
        raise ApiError(400, {field: [f"{field} must be a non-negative whole number of minor units."]})
    if value > 10**9:
        raise ApiError(400, {field: [f"{field} is too large."]})
    return int(value)


def round_minor(x: Decimal) -> int:
    return int(x.quantize(Decimal(1), rounding=ROUND_HALF_UP))


class Emulator:
    """The research API and the participant side over one `DocStore`."""

    def __init__(self, store: DocStore, clock: Clock, *, fee_rate: Decimal = Decimal("0.333"),
                 vat_rate: Decimal = Decimal("0"), currency: str = "GBP", balance_minor: int = 1_000_000,
                 auto_approve_days: float = 21.0) -> None:
        self.db = store
        self.clock = clock
        self.fee_rate = Decimal(fee_rate)
        self.vat_rate = Decimal(vat_rate)
        self.currency = currency
        self.initial_balance = int(balance_minor)
        self.auto_approve_seconds = auto_approve_days * 86400.0

    # -- accounts -------------------------------------------------------------------------------------
    def add_researcher(self, name: str, token: str | None = None) -> str:
        """Create a researcher with one workspace and project; returns the API token (stored hashed)."""
        token = token or secrets.token_urlsafe(32)
        user_id, ws_id, project_id = new_id(), new_id(), new_id()
        self.db.put("user", {"id": user_id, "name": name, "email": f"{name}@emulator.invalid", "workspace": ws_id,
                             "token_hash": token_hash(token)})
        self.db.put("token", {"id": token_hash(token), "user": user_id})
        self.db.put("workspace", {"id": ws_id, "title": f"{name}'s workspace", "description": "", "owner": user_id,
                                  "currency_code": self.currency, "balance": self.initial_balance}, owner=user_id)
        self.db.put("project", {"id": project_id, "title": "Project", "description": "", "owner": user_id,
                                "workspace": ws_id, "type": "PRIVATE"}, parent=ws_id)
        return token

    def authenticate(self, header: str | None) -> dict[str, Any]:
        if not header or not header.startswith("Token "):
            raise ApiError(401, "Authentication credentials were not provided.")
        row = self.db.get("token", token_hash(header[len("Token "):].strip()))
        user = self.db.get("user", row["user"]) if row else None
        if user is None:
            raise ApiError(401, "Invalid token.")
        return user

    def me(self, user: dict[str, Any]) -> dict[str, Any]:
        ws = self._workspace(user, user["workspace"])
        total, available = self._balances(ws)
        return {"id": user["id"], "email": user["email"], "name": user["name"], "username": user["name"],
                "user_type": "researcher", "currency_code": self.currency, "balance": total, "available_balance": available,
                "fees_percentage": float(self.fee_rate * 100), "vat_percentage": float(self.vat_rate * 100),
                "service_margin_percentage": str(float(self.fee_rate * 100)), "status": "ACTIVE"}

    # -- workspaces and projects ----------------------------------------------------------------------
    def _workspace(self, user: dict[str, Any], ws_id: str) -> dict[str, Any]:
        ws = self.db.get("workspace", ws_id)
        if ws is None or ws["owner"] != user["id"]:
            raise ApiError(404, "Workspace not found.")
        return ws

    def workspaces(self, user: dict[str, Any]) -> list[dict[str, Any]]:
        return [self._workspace_out(w) for w in self.db.owned("workspace", user["id"])]

    def _workspace_out(self, ws: dict[str, Any]) -> dict[str, Any]:
        return {k: ws[k] for k in ("id", "title", "description", "owner", "currency_code")} | {
            "projects": [{"id": p["id"], "title": p["title"]} for p in self.db.children("project", ws["id"])]}

    def create_workspace(self, user: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        title = body.get("title")
        if not isinstance(title, str) or not title.strip():
            raise ApiError(400, {"title": ["This field is required."]})
        ws = {"id": new_id(), "title": title, "description": str(body.get("description") or ""), "owner": user["id"],
              "currency_code": body.get("currency_code") or self.currency, "balance": self.initial_balance}
        self.db.put("workspace", ws, owner=user["id"])
        return self._workspace_out(ws)

    def get_workspace(self, user: dict[str, Any], ws_id: str) -> dict[str, Any]:
        return self._workspace_out(self._workspace(user, ws_id))

    def balance(self, user: dict[str, Any], ws_id: str) -> dict[str, Any]:
        ws = self._workspace(user, ws_id)
        total, available = self._balances(ws)
        rewards, fees, vat = self.db.charged(workspace=ws_id)
        return {"currency_code": ws["currency_code"], "total_balance": total,
                "balance_breakdown": {"rewards": rewards, "fees": fees, "vat": vat},
                "available_balance": available,
                "available_balance_breakdown": {"rewards": available, "fees": 0, "vat": 0}}

    def _balances(self, ws: dict[str, Any]) -> tuple[int, int]:
        spent = sum(self.db.charged(workspace=ws["id"]))
        total = int(ws["balance"]) - spent
        committed = 0
        for project in self.db.children("project", ws["id"]):
            for study in self.db.children("study", project["id"]):
                if study["status"] in ("ACTIVE", "PAUSED", "AWAITING REVIEW"):
                    committed += self._open_places(study) * self.unit_cost(int(study["reward"]))
        return total, total - committed

    def projects(self, user: dict[str, Any], ws_id: str) -> list[dict[str, Any]]:
        self._workspace(user, ws_id)
        return self.db.children("project", ws_id)

    def create_project(self, user: dict[str, Any], ws_id: str, body: dict[str, Any]) -> dict[str, Any]:
        self._workspace(user, ws_id)
        title = body.get("title")
        if not isinstance(title, str) or not title.strip():
            raise ApiError(400, {"title": ["This field is required."]})
        project = {"id": new_id(), "title": title, "description": str(body.get("description") or ""),
                   "owner": user["id"], "workspace": ws_id, "type": body.get("type") or "PRIVATE"}
        self.db.put("project", project, parent=ws_id)
        return project

    def project(self, user: dict[str, Any], project_id: str) -> dict[str, Any]:
        project = self.db.get("project", project_id)
        if project is None or project["owner"] != user["id"]:
            raise ApiError(404, "Project not found.")
        return project

    # -- money ----------------------------------------------------------------------------------------
    def split(self, amount: int) -> tuple[int, int, int]:
        """(reward, fee, VAT on the fee) in minor units for one payment of `amount`."""
        fee = round_minor(Decimal(amount) * self.fee_rate)
        vat = round_minor(Decimal(fee) * self.vat_rate)
        return amount, fee, vat

    def unit_cost(self, amount: int) -> int:
        return sum(self.split(amount))

    def cost_calculator(self, body: dict[str, Any]) -> dict[str, Any]:
        reward = minor(body.get("reward"), "reward")
        places = minor(body.get("total_available_places"), "total_available_places")
        return {"total_cost": self.unit_cost(reward) * places}

    # -- studies --------------------------------------------------------------------------------------
    def study(self, user: dict[str, Any], study_id: str) -> dict[str, Any]:
        study = self.db.get("study", study_id)
        if study is None or study["owner"] != user["id"]:
            raise ApiError(404, "Study not found.")
        return study

    def create_study(self, user: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiError(400, "Expected a JSON object.")
        problems: dict[str, list[str]] = {}
        for f in REQUIRED_STUDY_FIELDS:
            if body.get(f) in (None, ""):
                problems.setdefault(f, []).append("This field is required.")
        if "status" in body:
            problems.setdefault("status", []).append("Use the transition endpoint to change a study's status.")
        if problems:
            raise ApiError(400, problems)
        project_id = body.get("project") or self.db.children("project", user["workspace"])[0]["id"]
        project = self.project(user, project_id)
        study: dict[str, Any] = {"id": new_id(), "owner": user["id"], "project": project["id"],
                                 "workspace": project["workspace"], "status": "UNPUBLISHED",
                                 "date_created": self.clock.now(), "published_at": None, "stopped": False,
                                 "currency_code": self.currency, "device_compatibility": [], "peripheral_requirements": [],
                                 "filters": [], "completion_codes": [], "internal_name": None, "metadata": None,
                                 "submissions_config": {"max_submissions_per_participant": 1,
                                                        "max_concurrent_submissions": -1}}
        self._apply_fields(study, body, draft=True)
        self.db.put("study", study, parent=project["id"], owner=user["id"])
        return self.study_out(study)

    def _apply_fields(self, study: dict[str, Any], body: dict[str, Any], draft: bool) -> None:
        problems: dict[str, list[str]] = {}
        for key, value in body.items():
            if key in ("id", "status", "owner", "workspace", "date_created", "published_at", "places_taken"):
                continue
            if not draft and key not in EDITABLE_AFTER_PUBLISH:
                problems.setdefault(key, []).append("This field cannot be changed once the study is published.")
                continue
            try:
                self._set_field(study, key, value, draft)
            except ApiError as exc:
                for f, msgs in (exc.detail.items() if isinstance(exc.detail, dict) else [(key, [str(exc.detail)])]):
                    problems.setdefault(f, []).extend(msgs)
        if problems:
            raise ApiError(400, problems)
        est = study.get("estimated_completion_time")
        if est is not None:
            floor = math.ceil(2 + 2 * est + 2 * math.sqrt(est))
            if study.get("maximum_allowed_time") is None:
                study["maximum_allowed_time"] = max(floor, int(est) * 10)
            elif study["maximum_allowed_time"] < floor:
                raise ApiError(400, {"maximum_allowed_time": [f"must be at least {floor} minutes for this estimate."]})

    def _set_field(self, study: dict[str, Any], key: str, value: Any, draft: bool) -> None:
        if key in ("reward", "estimated_completion_time", "maximum_allowed_time"):
            v = minor(value, key)
            if v <= 0:
                raise ApiError(400, {key: ["must be greater than zero."]})
            study[key] = v
        elif key == "total_available_places":
            v = minor(value, key)
            if v <= 0:
                raise ApiError(400, {key: ["must be greater than zero."]})
            if not draft and v < int(study["total_available_places"]):
                raise ApiError(400, {key: ["Places can only be increased once a study is published."]})
            study[key] = v
        elif key == "external_study_url":
            if not isinstance(value, str) or not value.startswith(("https://", "http://")):
                raise ApiError(400, {key: ["Enter a valid URL."]})
            study[key] = value
        elif key == "prolific_id_option":
            if value not in ("url_parameters", "question", "not_required"):
                raise ApiError(400, {key: [f'"{value}" is not a valid choice.']})
            study[key] = value
        elif key == "device_compatibility":
            if not isinstance(value, list) or not set(value) <= DEVICES:
                raise ApiError(400, {key: ["must be a list of desktop, tablet, mobile."]})
            study[key] = value
        elif key == "completion_codes":
            study[key] = self._check_codes(value)
        elif key == "filters":
            study[key] = self._check_filters(value)
        elif key == "eligibility_requirements":
            study[key] = value
            study["filters"] = study.get("filters", []) + self._legacy_filters(value)
        elif key == "submissions_config":
            if not isinstance(value, dict):
                raise ApiError(400, {key: ["must be an object."]})
            study[key] = {**study.get(key, {}), **value}
        else:  # name, description, internal_name, completion_code/option (legacy), metadata, labels...
            study[key] = value

    def _check_codes(self, codes: Any) -> list[dict[str, Any]]:
        if not isinstance(codes, list):
            raise ApiError(400, {"completion_codes": ["must be a list."]})
        seen: set[str] = set()
        for c in codes:
            if not isinstance(c, dict) or "code_type" not in c:
                raise ApiError(400, {"completion_codes": ["each code needs code and code_type."]})
            actions = {a.get("action") for a in c.get("actions", []) if isinstance(a, dict)}
            if {"AUTOMATICALLY_APPROVE", "MANUALLY_REVIEW"} <= actions:
                raise ApiError(400, {"completion_codes": ["a code cannot both approve automatically and ask for review."]})
            if c.get("code") is not None:
                if c["code"] in seen:
                    raise ApiError(400, {"completion_codes": [f"code {c['code']} is used twice."]})
                seen.add(c["code"])
        return codes

    def _check_filters(self, filters: Any) -> list[dict[str, Any]]:
        if not isinstance(filters, list):
            raise ApiError(400, {"filters": ["must be a list."]})
        for f in filters:
            fid = f.get("filter_id") if isinstance(f, dict) else None
            if fid in ("and", "or"):
                self._check_filters(f.get("selected_filters", []))
            elif fid in RANGE_FILTERS:
                rng = f.get("selected_range")
                if not isinstance(rng, dict):
                    raise ApiError(400, {"filters": [f"{fid} needs selected_range."]})
            elif fid in SELECT_FILTERS or fid in ID_FILTERS:
                if not isinstance(f.get("selected_values"), list):
                    raise ApiError(400, {"filters": [f"{fid} needs selected_values."]})
            else:
                raise ApiError(400, {"filters": [f"unknown filter_id {fid!r}."]})
        return filters

    def _legacy_filters(self, reqs: Any) -> list[dict[str, Any]]:
        """Translate the legacy `eligibility_requirements` forms older clients send into filters."""
        out: list[dict[str, Any]] = []
        for r in reqs if isinstance(reqs, list) else []:
            cls = str(r.get("_cls", "")).rsplit(".", 1)[-1]
            attrs = {a.get("name"): a.get("value") for a in r.get("attributes", []) if isinstance(a, dict)}
            if cls.startswith("ApprovalRate"):
                out.append({"filter_id": "approval_rate", "selected_range": {
                    "lower": attrs.get("minimum_approval_rate", 0), "upper": attrs.get("maximum_approval_rate", 100)}})
            elif cls.startswith("ApprovalNumbers"):
                out.append({"filter_id": "approval_numbers", "selected_range": {
                    "lower": attrs.get("minimum_approvals", 0), "upper": attrs.get("maximum_approvals", 10**9)}})
            elif cls.startswith("CustomBlacklist"):
                out.append({"filter_id": "custom_blocklist", "selected_values": list(attrs.get("black_list") or [])})
            elif cls.startswith("CustomWhitelist"):
                out.append({"filter_id": "custom_allowlist", "selected_values": list(attrs.get("white_list") or [])})
            elif cls.startswith("ParticipantGroup"):
                ids = [a.get("id") for a in r.get("attributes", []) if a.get("value")]
                out.append({"filter_id": "participant_group_allowlist", "selected_values": ids})
            else:
                raise ApiError(400, {"eligibility_requirements": [f"unknown requirement {cls!r}."]})
        return out

    def update_study(self, user: dict[str, Any], study_id: str, body: dict[str, Any]) -> dict[str, Any]:
        study = self.study(user, study_id)
        draft = study["status"] == "UNPUBLISHED"
        grew = not draft and int(body.get("total_available_places", study["total_available_places"])) > int(study["total_available_places"])
        self._apply_fields(study, body, draft=draft)
        if grew:
            study["stopped"] = False
        self._settle(study)
        self.db.put("study", study)
        return self.study_out(study)

    def delete_study(self, user: dict[str, Any], study_id: str) -> None:
        study = self.study(user, study_id)
        if study["status"] != "UNPUBLISHED":
            raise ApiError(400, "Only draft studies can be deleted.")
        self.db.delete("study", study_id)

    def list_studies(self, user: dict[str, Any], query: dict[str, str]) -> list[dict[str, Any]]:
        state = query.get("state") or next((s for s in STUDY_STATUSES if query.get(s) == "1"), None)
        if query.get("published") == "0":
            state = "UNPUBLISHED"
        rows = [self.study_out(s) for s in self.db.owned("study", user["id"])]
        return [r for r in rows if state is None or r["status"] == state]

    def transition_study(self, user: dict[str, Any], study_id: str, body: dict[str, Any]) -> dict[str, Any]:
        study = self.study(user, study_id)
        action, status = body.get("action"), study["status"]
        if action == "PUBLISH" and status == "UNPUBLISHED":
            self._check_ready(study)
            ws = self.db.get("workspace", study["workspace"])
            assert ws is not None
            _, available = self._balances(ws)
            need = self.unit_cost(int(study["reward"])) * int(study["total_available_places"])
            if need > available:
                raise ApiError(400, f"Insufficient funds: the study needs {need}, the workspace has {available} available.")
            study["status"], study["published_at"] = "ACTIVE", self.clock.now()
        elif action == "PAUSE" and status == "ACTIVE":
            study["status"] = "PAUSED"
        elif action == "START" and status == "PAUSED":
            study["status"] = "ACTIVE"
        elif action == "STOP" and status in ("ACTIVE", "PAUSED", "AWAITING REVIEW"):
            study["stopped"] = True
            study["status"] = "AWAITING REVIEW"
            self._settle(study)
        elif action == "SCHEDULE_PUBLISH" and status == "UNPUBLISHED":
            raise ApiError(400, "Scheduled publishing is not supported by the emulator.")
        else:
            raise ApiError(400, f"Cannot {action} a study that is {status}.")
        self.db.put("study", study)
        return self.study_out(study)

    def _check_ready(self, study: dict[str, Any]) -> None:
        missing = [f for f in REQUIRED_STUDY_FIELDS if study.get(f) in (None, "")]
        if not study.get("completion_codes") and not study.get("completion_code"):
            missing.append("completion_codes")
        if missing:
            raise ApiError(400, {f: ["This field is required to publish."] for f in missing})

    def _subs(self, study_id: str) -> list[dict[str, Any]]:
        return self.db.children("submission", study_id)

    def _open_places(self, study: dict[str, Any]) -> int:
        subs = self._subs(study["id"])
        approved = sum(1 for s in subs if s["status"] == "APPROVED")
        return max(0, int(study["total_available_places"]) - approved)

    def _settle(self, study: dict[str, Any]) -> None:
        """Prolific's automatic status moves after any change of submissions or places."""
        if study["status"] not in ("ACTIVE", "AWAITING REVIEW", "COMPLETED"):
            return
        subs = self._subs(study["id"])
        finished = sum(1 for s in subs if s["status"] in FINISHED)
        waiting = sum(1 for s in subs if s["status"] == "AWAITING REVIEW")
        in_progress = sum(1 for s in subs if s["status"] in ("RESERVED", "ACTIVE"))
        if study["stopped"] or finished >= int(study["total_available_places"]):
            study["status"] = "AWAITING REVIEW" if waiting or in_progress else "COMPLETED"
        else:
            study["status"] = "ACTIVE"

    def study_out(self, study: dict[str, Any]) -> dict[str, Any]:
        subs = self._subs(study["id"])
        reward = int(study.get("reward") or 0)
        _, fee, vat = self.split(reward)
        out = {k: v for k, v in study.items() if k not in ("owner", "stopped")}
        est = study.get("estimated_completion_time") or 0
        out.update({"places_taken": sum(1 for s in subs if s["status"] in TAKES_PLACE),
                    "number_of_submissions": len(subs),
                    "total_cost": self.unit_cost(reward) * int(study.get("total_available_places") or 0),
                    "fees_per_submission": fee, "fees_percentage": float(self.fee_rate * 100),
                    "vat_percentage": float(self.vat_rate * 100), "researcher": {"id": study["owner"]},
                    "estimated_reward_per_hour": round(reward * 60 / est) if est else None,
                    "is_underpaying": None, "study_type": "SINGLE", "_links": {}})
        return out

    # -- submissions (research side) --------------------------------------------------------------------
    def submission(self, user: dict[str, Any], sub_id: str) -> dict[str, Any]:
        sub = self.db.get("submission", sub_id)
        if sub is None or sub["owner"] != user["id"]:
            raise ApiError(404, "Submission not found.")
        return sub

    @staticmethod
    def submission_out(sub: dict[str, Any]) -> dict[str, Any]:
        return {"id": sub["id"], "study_id": sub["study_id"], "participant": sub["participant_id"],
                "status": sub["status"], "started_at": sub["started_at"], "completed_at": sub["completed_at"],
                "entered_code": sub["entered_code"], "parent_study_id": None, "bonus_payments": list(sub["bonus_payments"]),
                "return_requested": sub["return_requested"]}

    @staticmethod
    def submission_list_item(sub: dict[str, Any]) -> dict[str, Any]:
        return {"id": sub["id"], "participant_id": sub["participant_id"], "status": sub["status"],
                "started_at": sub["started_at"], "completed_at": sub["completed_at"], "has_siblings": False,
                "study_code": sub["entered_code"], "return_requested": sub["return_requested"]}

    def list_submissions(self, user: dict[str, Any], study_id: str | None, query: dict[str, str]) -> list[dict[str, Any]]:
        if not study_id:
            raise ApiError(400, {"study": ["This query parameter is required."]})
        study = self.study(user, study_id)
        want = query.get("status")
        want = want.replace("_", " ") if want else None
        return [self.submission_list_item(s) for s in self._subs(study["id"]) if want is None or s["status"] == want]

    def counts(self, user: dict[str, Any], study_id: str) -> dict[str, int]:
        study = self.study(user, study_id)
        out = {k: 0 for k in ("ACTIVE", "APPROVED", "AWAITING REVIEW", "REJECTED", "RESERVED", "RETURNED",
                              "TIMED-OUT", "PARTIALLY APPROVED", "SCREENED OUT")}
        for s in self._subs(study["id"]):
            out[s["status"]] = out.get(s["status"], 0) + 1
        out["TOTAL"] = sum(out.values())
        return out

    def study_cost(self, user: dict[str, Any], study_id: str) -> dict[str, Any]:
        study = self.study(user, study_id)

        def money(amount: int) -> dict[str, Any]:
            return {"amount": amount, "currency": study["currency_code"]}

        r = self.db.charged(study=study_id, what="reward")
        b = self.db.charged(study=study_id, what="bonus")
        return {"rewards": {"rewards": money(r[0]), "fees": money(r[1]), "tax": money(r[2])},
                "bonuses": {"rewards": money(b[0]), "fees": money(b[1]), "tax": money(b[2])}, "_links": {}}

    def _log_transition(self, sub: dict[str, Any], action: str, actor: str) -> None:
        """Every decision that reached a submission, repeats included (kind "transition"): what an audit
        reads to tell a decision sent twice, which Prolific itself would not show."""
        self.db.put("transition", {"id": new_id(), "submission_id": sub["id"], "study_id": sub["study_id"], "action": action,
                                   "from": sub["status"], "actor": actor, "at": self.clock.now()}, parent=sub["id"])

    def transition_submission(self, user: dict[str, Any], sub_id: str, body: dict[str, Any]) -> dict[str, Any]:
        sub = self.submission(user, sub_id)
        action = body.get("action")
        self._log_transition(sub, str(action), "researcher")  # rolled back with the request if it is refused
        if action == "APPROVE":
            self._approve(sub)
        elif action == "REJECT":
            if sub["status"] == "REJECTED":
                return self.submission_out(sub)  # final; a repeat is ignored
            message = body.get("message")
            category = body.get("rejection_category")
            if isinstance(category, list) and len(category) == 1:
                category = category[0]  # one client sends a one-element list
            if not isinstance(message, str) or len(message) < 100:
                raise ApiError(400, {"message": ["A rejection message of at least 100 characters is required."]})
            if category not in REJECTION_CATEGORIES:
                raise ApiError(400, {"rejection_category": [f'"{category}" is not a valid choice.']})
            if sub["status"] != "AWAITING REVIEW":
                raise ApiError(400, f"Cannot reject a submission that is {sub['status']}.")
            sub.update(status="REJECTED", rejection_category=category, rejection_message=message)
        else:
            raise ApiError(400, {"action": [f'"{action}" is not supported by the emulator (APPROVE, REJECT).']})
        self._save_sub(sub)
        return self.submission_out(sub)

    def _approve(self, sub: dict[str, Any]) -> None:
        if sub["status"] == "APPROVED":
            return  # final; a repeat is ignored and pays nothing
        if sub["status"] != "AWAITING REVIEW":
            raise ApiError(400, f"Cannot approve a submission that is {sub['status']}.")
        study = self.db.get("study", sub["study_id"])
        assert study is not None
        reward, fee, vat = self.split(int(study["reward"]))
        self.db.charge(study["workspace"], study["id"], sub["id"], "reward", reward, fee, vat, self.clock.now())
        sub["status"] = "APPROVED"

    def _save_sub(self, sub: dict[str, Any]) -> None:
        self.db.put("submission", sub)
        study = self.db.get("study", sub["study_id"])
        assert study is not None
        self._settle(study)
        self.db.put("study", study)

    def bulk_approve(self, user: dict[str, Any], body: dict[str, Any]) -> str:
        ids = body.get("submission_ids")
        if ids is None and body.get("study_id") and isinstance(body.get("participant_ids"), list):
            study = self.study(user, body["study_id"])
            by_pid = {s["participant_id"]: s["id"] for s in self._subs(study["id"]) if s["status"] in ("AWAITING REVIEW", "APPROVED")}
            ids = [by_pid.get(p, p) for p in body["participant_ids"]]
        if not isinstance(ids, list) or not ids or len(ids) > BULK_APPROVE_MAX:
            raise ApiError(400, {"submission_ids": [f"give 1 to {BULK_APPROVE_MAX} submission ids."]})
        subs = []
        bad = []
        for sid in ids:
            sub = self.db.get("submission", str(sid))
            if sub is None or sub["owner"] != user["id"] or sub["status"] not in ("AWAITING REVIEW", "APPROVED"):
                bad.append(str(sid))
            else:
                subs.append(sub)
        if bad:
            raise ApiError(400, {"submission_ids": [f"not awaiting review: {', '.join(bad)}"]})
        for sub in subs:
            self._log_transition(sub, "APPROVE", "researcher")
            self._approve(sub)
            self._save_sub(sub)
        return "The request to bulk approve has been made successfully."

    # -- bonuses ----------------------------------------------------------------------------------------
    def create_bonus(self, user: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        study = self.study(user, str(body.get("study_id") or ""))
        text = body.get("csv_bonuses")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, {"csv_bonuses": ["This field is required."]})
        subs = self._subs(study["id"])
        by_pid = {s["participant_id"]: s for s in subs if s["status"] not in ("RETURNED", "TIMED-OUT")}
        by_sid = {s["id"]: s for s in subs}
        lines, bad = [], []
        for raw in text.strip().splitlines():
            ident, _, amount = raw.partition(",")
            sub = by_sid.get(ident.strip()) or by_pid.get(ident.strip())
            try:
                value = Decimal(amount.strip())
            except InvalidOperation:
                value = Decimal(-1)
            if sub is None or value <= 0 or value != value.quantize(Decimal("0.01")) or value > 1000:
                bad.append(ident.strip() or raw)
                continue
            lines.append({"submission_id": sub["id"], "participant_id": sub["participant_id"], "amount": int(value * 100)})
        if bad:
            raise ApiError(400, {"csv_bonuses": [f"invalid lines or ids that did not take part in the study: {', '.join(bad)}"]})
        if len(lines) > BONUS_LINES_MAX:
            raise ApiError(400, {"csv_bonuses": [f"at most {BONUS_LINES_MAX} lines per request."]})
        amount = sum(line["amount"] for line in lines)
        fees = sum(self.split(line["amount"])[1] for line in lines)
        vat = sum(self.split(line["amount"])[2] for line in lines)
        batch = {"id": new_id(), "study": study["id"], "owner": user["id"], "amount": amount, "fees": fees, "vat": vat,
                 "total_amount": amount + fees + vat, "lines": lines, "times_paid": 0}
        self.db.put("bonus", batch, parent=study["id"], owner=user["id"])
        return {k: batch[k] for k in ("id", "study", "amount", "fees", "vat", "total_amount")}

    def pay_bonus(self, user: dict[str, Any], batch_id: str) -> str:
        batch = self.db.get("bonus", batch_id)
        if batch is None or batch["owner"] != user["id"]:
            raise ApiError(404, "Bonus payment not found.")
        study = self.db.get("study", batch["study"])
        assert study is not None
        ws = self.db.get("workspace", study["workspace"])
        assert ws is not None
        total, _ = self._balances(ws)
        if batch["total_amount"] > total:
            raise ApiError(400, "Insufficient funds for these bonuses.")
        batch["times_paid"] += 1  # Prolific pays again on every call: no idempotency here, on purpose
        for n, line in enumerate(batch["lines"]):
            sub = self.db.get("submission", line["submission_id"])
            assert sub is not None
            sub["bonus_payments"].append(line["amount"])
            self.db.put("submission", sub)
            reward, fee, vat = self.split(line["amount"])
            self.db.charge(study["workspace"], study["id"], f"{batch_id}:{batch['times_paid']}:{n}", "bonus", reward, fee, vat,
                           self.clock.now())
        self.db.put("bonus", batch)
        return "The bonus payments are being processed."

    # -- participant groups -------------------------------------------------------------------------------
    def group(self, user: dict[str, Any], group_id: str) -> dict[str, Any]:
        g = self.db.get("group", group_id)
        if g is None or g["owner"] != user["id"] or g["is_deleted"]:
            raise ApiError(404, "Participant group not found.")
        return g

    @staticmethod
    def group_out(g: dict[str, Any]) -> dict[str, Any]:
        return {"id": g["id"], "name": g["name"], "project_id": g.get("project_id"), "workspace_id": g["workspace_id"],
                "organisation_id": None, "description": g.get("description", ""), "participant_count": len(g["members"]),
                "is_deleted": g["is_deleted"], "feeder_studies": []}

    def create_group(self, user: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        name = body.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ApiError(400, {"name": ["This field is required."]})
        ws_id = body.get("workspace_id") or user["workspace"]
        project_id = body.get("project_id")
        if project_id:
            ws_id = self.project(user, project_id)["workspace"]
        self._workspace(user, ws_id)
        ids = body.get("participant_ids") or []
        g = {"id": new_id(), "name": name, "owner": user["id"], "workspace_id": ws_id, "project_id": project_id,
             "description": str(body.get("description") or ""), "members": {}, "is_deleted": False}
        for pid in ids:
            g["members"][str(pid)] = self.clock.now()
        self.db.put("group", g, owner=user["id"])
        return self.group_out(g)

    def list_groups(self, user: dict[str, Any]) -> list[dict[str, Any]]:
        return [self.group_out(g) for g in self.db.owned("group", user["id"]) if not g["is_deleted"]]

    def update_group(self, user: dict[str, Any], group_id: str, body: dict[str, Any]) -> dict[str, Any]:
        g = self.group(user, group_id)
        if "name" in body:
            g["name"] = str(body["name"])
        if "participant_ids" in body:
            g["members"] = {str(p): self.clock.now() for p in body["participant_ids"] or []}
        self.db.put("group", g)
        return self.group_out(g)

    def delete_group(self, user: dict[str, Any], group_id: str) -> None:
        g = self.group(user, group_id)
        g["is_deleted"] = True
        self.db.put("group", g)

    def group_members(self, user: dict[str, Any], group_id: str, method: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        g = self.group(user, group_id)
        ids = [str(p) for p in (body.get("participant_ids") or [])] if method != "GET" else []
        for pid in ids:
            if method == "POST":
                g["members"].setdefault(pid, self.clock.now())
            else:
                g["members"].pop(pid, None)
        if ids:
            self.db.put("group", g)
        return [{"participant_id": p, "datetime_created": t} for p, t in g["members"].items()]

    # -- participants (the emulator's side channel) ------------------------------------------------------
    def add_participant(self, *, country: str = "US", approval_rate: float = 99.0, approvals: int = 100,
                        languages: tuple[str, ...] = ("en",), age: int = 30, external_id: str | None = None) -> tuple[str, str]:
        """A participant and the secret their simulated browser authenticates with.

        With an `external_id` (the operator's own name for a simulated person) the same person is found
        again on later calls, e.g. after a restart of the crowd: same participant id, the profile updated,
        and a fresh secret, since only the secret's hash is kept and the caller lost the old one.
        """
        ref = self.db.get("participant_ref", external_id) if external_id else None
        pid, secret = (ref["participant"] if ref else new_id()), secrets.token_urlsafe(24)
        self.db.put("participant", {"id": pid, "country": country, "approval_rate": approval_rate, "approvals": approvals,
                                    "languages": list(languages), "age": age, "secret_hash": token_hash(secret),
                                    **({"external_id": external_id} if external_id else {})})
        if external_id and ref is None:
            self.db.put("participant_ref", {"id": external_id, "participant": pid})
        return pid, secret

    def participant(self, pid: str, secret: str | None) -> dict[str, Any]:
        p = self.db.get("participant", pid)
        if p is None or not secret or not secrets.compare_digest(p["secret_hash"], token_hash(secret)):
            raise ApiError(401, "Not signed in as this participant.")
        return p

    def eligible(self, p: dict[str, Any], study: dict[str, Any]) -> bool:
        return all(self._passes(p, f, study) for f in study.get("filters", []))

    def _passes(self, p: dict[str, Any], f: dict[str, Any], study: dict[str, Any]) -> bool:
        fid = f.get("filter_id")
        if fid == "and":
            return all(self._passes(p, g, study) for g in f.get("selected_filters", []))
        if fid == "or":
            return any(self._passes(p, g, study) for g in f.get("selected_filters", []))
        if fid in RANGE_FILTERS:
            rng, value = f["selected_range"], p.get(RANGE_FILTERS[fid], 0)
            return (rng.get("lower") is None or value >= rng["lower"]) and (rng.get("upper") is None or value <= rng["upper"])
        values = set(map(str, f.get("selected_values", [])))
        if fid in SELECT_FILTERS:
            mine = p.get(SELECT_FILTERS[fid])
            return bool(values & (set(mine) if isinstance(mine, list) else {mine}))
        if fid in ("participant_group_allowlist", "participant_group_blocklist"):
            member = any(p["id"] in (self.db.get("group", g) or {}).get("members", {}) for g in values)
            return member if fid.endswith("allowlist") else not member
        if fid in ("previous_studies_allowlist", "previous_studies_blocklist"):
            took = any(s["participant_id"] == p["id"] for sid in values for s in self._subs(sid))
            return took if fid.endswith("allowlist") else not took
        if fid in ("custom_allowlist", "custom_blocklist"):
            return (p["id"] in values) == fid.endswith("allowlist")
        return False

    def open_studies(self, p: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for study in self.db.all("study"):
            if study["status"] != "ACTIVE" or not self.eligible(p, study) or not self._can_take(p, study):
                continue
            out.append({"id": study["id"], "name": study["name"], "reward": study["reward"],
                        "estimated_completion_time": study["estimated_completion_time"],
                        "places_left": int(study["total_available_places"]) - self.study_out(study)["places_taken"]})
        return out

    def _can_take(self, p: dict[str, Any], study: dict[str, Any]) -> bool:
        subs = self._subs(study["id"])
        if sum(1 for s in subs if s["status"] in TAKES_PLACE) >= int(study["total_available_places"]):
            return False
        mine = [s for s in subs if s["participant_id"] == p["id"]]
        cfg = study.get("submissions_config") or {}
        most = int(cfg.get("max_submissions_per_participant", 1))
        concurrent = int(cfg.get("max_concurrent_submissions", -1))
        if most != -1 and len(mine) >= most:
            return False
        if concurrent != -1 and sum(1 for s in mine if s["status"] in ("RESERVED", "ACTIVE")) >= concurrent:
            return False
        return True

    def start(self, p: dict[str, Any], study_id: str) -> dict[str, Any]:
        """Reserve a place and start: the participant lands on the study URL with placeholders filled in."""
        study = self.db.get("study", study_id)
        if study is None or study["status"] != "ACTIVE":
            raise ApiError(404, "This study is not available.")
        if not self.eligible(p, study):
            raise ApiError(403, "You are not eligible for this study.")
        if not self._can_take(p, study):
            raise ApiError(400, "No place is available for you in this study.")
        now = self.clock.now()
        sub = {"id": new_id(), "study_id": study_id, "participant_id": p["id"], "owner": study["owner"],
               "status": "ACTIVE", "reserved_at": now, "started_at": now, "completed_at": None, "entered_code": None,
               "bonus_payments": [], "return_requested": None}
        self.db.put("submission", sub, parent=study_id, owner=p["id"])
        url = study["external_study_url"]
        for name, value in (("PROLIFIC_PID", p["id"]), ("STUDY_ID", study_id), ("SESSION_ID", sub["id"])):
            url = url.replace("{{%" + name + "%}}", value).replace("{%" + name + "%}", value)
        return {"submission_id": sub["id"], "url": url}

    def _own_sub(self, p: dict[str, Any], sub_id: str) -> dict[str, Any]:
        sub = self.db.get("submission", sub_id)
        if sub is None or sub["participant_id"] != p["id"]:
            raise ApiError(404, "Submission not found.")
        return sub

    def complete(self, p: dict[str, Any], sub_id: str, code: str | None) -> dict[str, Any]:
        """The completion redirect (`?cc=CODE`): the code's actions decide the submission's next status."""
        sub = self._own_sub(p, sub_id)
        if sub["status"] != "ACTIVE":
            raise ApiError(400, f"This submission is {sub['status']}.")
        study = self.db.get("study", sub["study_id"])
        assert study is not None
        sub.update(completed_at=self.clock.now(), entered_code=code or "NOCODE", status="AWAITING REVIEW")
        codes = [c for c in study.get("completion_codes", []) if c.get("actor", "participant") == "participant"]
        match = next((c for c in codes if c.get("code") == code), None)
        if match is None and study.get("completion_code") == code and code:
            match = {"code": code, "actions": [{"action": "MANUALLY_REVIEW"}]}
        for action in (match or {}).get("actions", []):
            if action.get("action") == "AUTOMATICALLY_APPROVE":
                self._approve(sub)
            elif action.get("action") == "REQUEST_RETURN":
                sub["return_requested"] = self.clock.now()
            elif action.get("action") == "ADD_TO_PARTICIPANT_GROUP":
                g = self.db.get("group", str(action.get("participant_group")))
                if g is not None:
                    g["members"].setdefault(p["id"], self.clock.now())
                    self.db.put("group", g)
        self._save_sub(sub)
        return {"status": sub["status"]}

    def return_submission(self, p: dict[str, Any], sub_id: str) -> dict[str, Any]:
        sub = self._own_sub(p, sub_id)
        if sub["status"] not in ("RESERVED", "ACTIVE", "AWAITING REVIEW"):
            raise ApiError(400, f"This submission is {sub['status']}.")
        sub["status"] = "RETURNED"
        self._save_sub(sub)
        return {"status": sub["status"]}

    def my_submission(self, p: dict[str, Any], sub_id: str) -> dict[str, Any]:
        return self.submission_out(self._own_sub(p, sub_id))

    def my_submissions(self, p: dict[str, Any]) -> list[dict[str, Any]]:
        """A participant's own submissions, oldest first (Prolific's "Submissions" page)."""
        return [self.submission_out(s) for s in self.db.owned("submission", p["id"])]

    # -- time -------------------------------------------------------------------------------------------
    def sweep(self) -> None:
        """Time-outs past `maximum_allowed_time` and Prolific's automatic approval of unreviewed work."""
        now = self.clock.now()
        for study in self.db.all("study"):
            if study["status"] in ("UNPUBLISHED", "COMPLETED"):
                continue
            limit = 60.0 * int(study.get("maximum_allowed_time") or 0)
            changed = False
            for sub in self._subs(study["id"]):
                if sub["status"] == "ACTIVE" and limit and now > sub["started_at"] + limit:
                    sub["status"] = "TIMED-OUT"
                elif sub["status"] == "AWAITING REVIEW" and now > (sub["completed_at"] or now) + self.auto_approve_seconds:
                    self._log_transition(sub, "APPROVE", "prolific")
                    self._approve(sub)
                else:
                    continue
                self.db.put("submission", sub)
                changed = True
            if changed:
                self._settle(study)
                self.db.put("study", study)


Handler = Callable[..., Any]
