"""What the Prolific emulator does: studies and their transitions, submissions, bonuses, groups, money.

Follows Prolific's API description (`shared/reference/prolific/openapi.yml`, which wins over
`shared/reference/prolific-api.md`): study statuses UNPUBLISHED -> ACTIVE <-> PAUSED, STOP -> COMPLETED
(even with submissions still to review; more places make it ACTIVE again), Prolific's automatic moves
(all places finished -> AWAITING REVIEW; all reviewed -> COMPLETED; a rejection -> ACTIVE again),
places that only grow once published, `max_concurrent_submissions` as the whole study's limit,
submission statuses and their final transitions (repeats ignored), bulk approval, bonus batches whose
pay call is NOT idempotent (each call pays again, as on Prolific) and may land later (`bonus_delay`),
filters as `catalogue` defines them (select filters by choice id), participant groups as allow/block
filters, times as ISO 8601 strings, errors of the research operations as 400s, and money in minor
units. Fee and VAT rates are settings: the real fee percentage could not be confirmed.

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
from campaign.prolific.emulator import catalogue
from campaign.prolific.emulator.common import ApiError, iso, new_id, not_found
from campaign.prolific.emulator.hooks import HookOperations
from campaign.prolific.emulator.store import ROLLED_BACK, DocStore
from campaign.prolific.emulator.tools import ResearcherTools

SWEPT_KINDS = frozenset({"submission", "study", "bonus_pay"})  # documents whose writes can bring a sweep earlier
STUDY_STATUSES = ("UNPUBLISHED", "SCHEDULED", "PUBLISHING", "ACTIVE", "PAUSED", "AWAITING REVIEW", "COMPLETED")
REJECTION_CATEGORIES = frozenset({"TOO_QUICKLY", "TOO_SLOWLY", "FAILED_INSTRUCTIONS", "INCOMP_LONGITUDINAL", "FAILED_CHECK",
                                  "LOW_EFFORT", "MALINGERING", "NO_CODE", "BAD_CODE", "NO_DATA", "UNSUPP_DEVICE", "OTHER"})
TAKES_PLACE = frozenset({"RESERVED", "ACTIVE", "AWAITING REVIEW", "APPROVED", "PARTIALLY APPROVED", "SCREENED OUT"})
FINISHED = frozenset({"AWAITING REVIEW", "APPROVED", "PARTIALLY APPROVED", "SCREENED OUT"})
EDITABLE_AFTER_PUBLISH = frozenset({"internal_name", "total_available_places", "access_details", "submissions_config"})
DEVICES = frozenset({"desktop", "tablet", "mobile"})
REQUIRED_STUDY_FIELDS = ("name", "description", "external_study_url", "prolific_id_option", "total_available_places",
                         "estimated_completion_time", "reward")
# Filters the emulator evaluates (`catalogue`): select filters by choice id, ranges inclusive.
RANGE_FILTERS = {fid: field for fid, (field, _lo, _hi) in catalogue.RANGE.items()}
SELECT_FILTERS = {fid: field for fid, (field, _choices) in catalogue.SELECT.items()}
ID_FILTERS = tuple(catalogue.ID_FILTERS)
BULK_APPROVE_MAX = 1000
BONUS_LINES_MAX = 200


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


class Emulator(ResearcherTools, HookOperations):
    """The research API and the participant side over one `DocStore`."""

    def __init__(self, store: DocStore, clock: Clock, *, fee_rate: Decimal = Decimal("0.333"),
                 vat_rate: Decimal = Decimal("0"), currency: str = "GBP", balance_minor: int = 1_000_000,
                 auto_approve_days: float = 21.0, bonus_delay: float = 0.0) -> None:
        self.db = store
        self.clock = clock
        self.fee_rate = Decimal(fee_rate)
        self.vat_rate = Decimal(vat_rate)
        self.currency = currency
        self.initial_balance = int(balance_minor)
        self.auto_approve_seconds = auto_approve_days * 86400.0
        # Prolific pays a bonus batch asynchronously ("in the following minutes"): seconds of this clock
        # before a pay call's payments show on the submissions (0: at once).
        self.bonus_delay = float(bonus_delay)
        # `sweep` has nothing to do before this time: the earliest time-out, automatic approval or bonus
        # landing it found; a written submission, study or bonus payment may bring one earlier, so any such
        # write makes the next request sweep again (an idle study costs a request nothing, not a scan)
        self._sweep_due = -math.inf
        store.on_put = self._written
        store.before_put = self._before_put

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
            raise not_found("Workspace")
        return ws

    def workspaces(self, user: dict[str, Any]) -> list[dict[str, Any]]:
        return [self._workspace_out(w) for w in self.db.owned("workspace", user["id"])]

    def _workspace_out(self, ws: dict[str, Any]) -> dict[str, Any]:
        owner = self.db.get("user", ws["owner"]) or {"id": ws["owner"], "name": "", "email": ""}
        return {k: ws[k] for k in ("id", "title", "description", "owner", "currency_code")} | {
            "naivety_distribution_rate": ws.get("naivety_distribution_rate"), "wallet": ws["id"],
            "users": [{"id": owner["id"], "name": owner["name"], "email": owner["email"], "roles": ["WORKSPACE_ADMIN"]}],
            "projects": [self.project_out(p) for p in self.db.children("project", ws["id"])]}

    def update_workspace(self, user: dict[str, Any], ws_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """`PATCH /workspaces/{id}/`: title, description and naivety rate change; the currency does not
        (a workspace's money is in one currency for its whole life)."""
        ws = self._workspace(user, ws_id)
        if "title" in body:
            if not isinstance(body["title"], str) or not body["title"].strip():
                raise ApiError(400, {"title": ["This field may not be blank."]})
            ws["title"] = body["title"]
        if "description" in body:
            ws["description"] = str(body["description"] or "")
        if "naivety_distribution_rate" in body:
            ws["naivety_distribution_rate"] = body["naivety_distribution_rate"]
        if body.get("currency_code") not in (None, ws["currency_code"]):
            raise ApiError(400, {"currency_code": ["A workspace's currency cannot be changed."]})
        self.db.put("workspace", ws)
        return self._workspace_out(ws)

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
        return [self.project_out(p) for p in self.db.children("project", ws_id)]

    @staticmethod
    def project_out(project: dict[str, Any]) -> dict[str, Any]:
        return {"id": project["id"], "title": project["title"], "description": project.get("description", ""),
                "owner": project["owner"], "workspace": project["workspace"], "type": project.get("type") or "PRIVATE",
                "public_details": project.get("public_details"), "users": [{"id": project["owner"]}],
                "naivety_distribution_rate": project.get("naivety_distribution_rate")}

    def update_project(self, user: dict[str, Any], project_id: str, body: dict[str, Any]) -> dict[str, Any]:
        project = self.project(user, project_id)
        for key in ("title", "description", "naivety_distribution_rate", "public_details"):
            if key in body:
                project[key] = body[key]
        if "type" in body:
            if body["type"] not in ("PRIVATE", "PUBLIC"):
                raise ApiError(400, {"type": [f'"{body["type"]}" is not a valid choice.']})
            project["type"] = body["type"]
        if not isinstance(project["title"], str) or not project["title"].strip():
            raise ApiError(400, {"title": ["This field may not be blank."]})
        self.db.put("project", project)
        return self.project_out(project)

    def create_project(self, user: dict[str, Any], ws_id: str, body: dict[str, Any]) -> dict[str, Any]:
        self._workspace(user, ws_id)
        title = body.get("title")
        if not isinstance(title, str) or not title.strip():
            raise ApiError(400, {"title": ["This field is required."]})
        if body.get("type", "PRIVATE") not in ("PRIVATE", "PUBLIC"):
            raise ApiError(400, {"type": [f'"{body["type"]}" is not a valid choice.']})
        project = {"id": new_id(), "title": title, "description": str(body.get("description") or ""),
                   "owner": user["id"], "workspace": ws_id, "type": body.get("type") or "PRIVATE"}
        self.db.put("project", project, parent=ws_id)
        return self.project_out(project)

    def project(self, user: dict[str, Any], project_id: str) -> dict[str, Any]:
        project = self.db.get("project", project_id)
        if project is None or project["owner"] != user["id"]:
            raise not_found("Project")
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
            raise not_found("Study")
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
        if study.get("filter_set_id"):
            study["filters"] = self.filter_set_filters(user, str(study["filter_set_id"]), study.get("filter_set_version"))
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
            study[key] = self.check_filters(value)
        elif key == "eligibility_requirements":
            # The legacy targeting older clients still send: not in the description, so kept and echoed but
            # never enforced (only `filters` target a study).
            study[key] = value
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

    def check_filters(self, filters: Any) -> list[dict[str, Any]]:
        """Filters as `GET /filters/` defines them: a select filter's values must be ids of its choices
        (not their text, not ISO codes), a range within the filter's bounds; anything else is a 400
        naming the filter and the values it does not know."""
        if not isinstance(filters, list):
            raise ApiError(400, {"filters": ["must be a list."]})
        for f in filters:
            fid = f.get("filter_id") if isinstance(f, dict) else None
            if fid in ("and", "or"):
                self.check_filters(f.get("selected_filters", []))
            elif fid in RANGE_FILTERS:
                rng = f.get("selected_range")
                _field, lo, hi = catalogue.RANGE[fid]
                bounds = [rng.get(k) for k in ("lower", "upper")] if isinstance(rng, dict) else []
                if not bounds or all(b is None for b in bounds):
                    raise ApiError(400, {"filters": [f"{fid} needs selected_range with lower or upper."]})
                if any(b is not None and (isinstance(b, bool) or not isinstance(b, int | float) or not lo <= b <= hi)
                       for b in bounds):
                    raise ApiError(400, {"filters": [f"{fid}: the range must lie within {lo}..{hi}."]})
            elif fid in SELECT_FILTERS or fid in ID_FILTERS:
                values = f.get("selected_values")
                if not isinstance(values, list) or not values:
                    raise ApiError(400, {"filters": [f"{fid} needs selected_values."]})
                if fid in SELECT_FILTERS:
                    choices = catalogue.SELECT[fid][1]
                    unknown = [str(v) for v in values if not isinstance(v, str) or v not in choices]
                    if unknown:
                        raise ApiError(400, {"filters": [f"{fid}: {', '.join(unknown)} are not ids of this filter's choices "
                                                         "(GET /filters/ lists them)."]})
            else:
                raise ApiError(400, {"filters": [f"unknown filter_id {fid!r}."]})
        return filters

    def update_study(self, user: dict[str, Any], study_id: str, body: dict[str, Any]) -> dict[str, Any]:
        study = self.study(user, study_id)
        draft = study["status"] == "UNPUBLISHED"
        grew = not draft and int(body.get("total_available_places", study["total_available_places"])) > int(study["total_available_places"])
        before = int(study["total_available_places"])
        self._apply_fields(study, body, draft=draft)
        if grew:
            study["stopped"] = False
        self._settle(study)
        self.db.put("study", study)
        if not draft and int(study["total_available_places"]) != before:
            self._log_study(study, "places")
        return self.study_out(study)

    def _log_study(self, study: dict[str, Any], event: str) -> None:
        """When a published study's places changed, and when it was published, stopped, paused or started
        again (kind "study_log"): Prolific shows none of this history, the emulator keeps it so a benchmark
        can tell how long each open place waited for a participant."""
        self.db.put("study_log", {"id": new_id(), "study_id": study["id"], "event": event, "at": self.clock.now(),
                                  "total": int(study["total_available_places"])}, parent=study["id"])

    def delete_study(self, user: dict[str, Any], study_id: str) -> dict[str, Any]:
        """Drafts only; the description answers `DELETE /studies/{id}/` with 200 and an empty object."""
        study = self.study(user, study_id)
        if study["status"] != "UNPUBLISHED":
            raise ApiError(400, "Only draft studies can be deleted.")
        self.db.delete("study", study_id)
        return {}

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
        elif action == "STOP" and status in ("ACTIVE", "PAUSED"):
            # COMPLETED at once, as the description's table has it, even with submissions still to review
            # (they are reviewed on the completed study); only more places make it ACTIVE again.
            study["stopped"] = True
            study["status"] = "COMPLETED"
        elif action == "SCHEDULE_PUBLISH" and status == "UNPUBLISHED":
            raise ApiError(400, "Scheduled publishing is not supported by the emulator.")
        else:
            raise ApiError(400, f"Cannot {action} a study that is {status}.")
        self.db.put("study", study)
        self._log_study(study, str(action).lower())
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
        if study["stopped"]:
            study["status"] = "COMPLETED"
        elif finished >= int(study["total_available_places"]):
            study["status"] = "AWAITING REVIEW" if waiting or in_progress else "COMPLETED"
        else:
            study["status"] = "ACTIVE"

    def study_out(self, study: dict[str, Any]) -> dict[str, Any]:
        subs = self._subs(study["id"])
        reward = int(study.get("reward") or 0)
        _, fee, vat = self.split(reward)
        out = {k: v for k, v in study.items() if k not in ("owner", "stopped")}
        out["date_created"], out["published_at"] = iso(study.get("date_created")), iso(study.get("published_at"))
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
            raise not_found("Submission")
        return sub

    @staticmethod
    def submission_out(sub: dict[str, Any]) -> dict[str, Any]:
        return {"id": sub["id"], "study_id": sub["study_id"], "participant": sub["participant_id"],
                "status": sub["status"], "started_at": iso(sub["started_at"]), "completed_at": iso(sub["completed_at"]),
                "entered_code": sub["entered_code"], "parent_study_id": None, "bonus_payments": list(sub["bonus_payments"]),
                "return_requested": iso(sub["return_requested"])}

    @staticmethod
    def submission_list_item(sub: dict[str, Any]) -> dict[str, Any]:
        return {"id": sub["id"], "participant_id": sub["participant_id"], "status": sub["status"],
                "started_at": iso(sub["started_at"]), "completed_at": iso(sub["completed_at"]), "has_siblings": False,
                "study_code": sub["entered_code"], "return_requested": iso(sub["return_requested"])}

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

    def request_return(self, user: dict[str, Any], sub_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """`POST /submissions/{id}/request-return/`: the participant is asked (a message on Prolific) to
        return the submission; nothing else changes. The reasons are required, free text."""
        sub = self.submission(user, sub_id)
        reasons = body.get("request_return_reasons")
        if not isinstance(reasons, list) or not reasons or not all(isinstance(r, str) and r.strip() for r in reasons):
            raise ApiError(400, {"request_return_reasons": ["A list of one or more reasons is required."]})
        if sub["status"] not in ("RESERVED", "ACTIVE", "AWAITING REVIEW"):
            raise ApiError(400, f"Cannot request the return of a submission that is {sub['status']}.")
        if sub.get("return_requested") is None:
            sub["return_requested"] = self.clock.now()
            sub["return_reasons"] = [str(r)[:500] for r in reasons[:10]]
            self.db.put("submission", sub)
        return {"id": sub["id"], "status": sub["status"], "participant": sub["participant_id"],
                "return_requested": iso(sub["return_requested"])}

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
            raise not_found("Bonus payment")
        study = self.db.get("study", batch["study"])
        assert study is not None
        ws = self.db.get("workspace", study["workspace"])
        assert ws is not None
        total, _ = self._balances(ws)
        if batch["total_amount"] > total:
            raise ApiError(400, "Insufficient funds for these bonuses.")
        batch["times_paid"] += 1  # Prolific pays again on every call: no idempotency here, on purpose
        self.db.put("bonus", batch)
        if self.bonus_delay > 0:  # paid "in the following minutes": the sweep lands it
            self.db.put("bonus_pay", {"id": f"{batch_id}:{batch['times_paid']}", "batch": batch_id, "time": batch["times_paid"],
                                      "due": self.clock.now() + self.bonus_delay})
        else:
            self._land_bonus(batch, batch["times_paid"])
        return "The bonus payments are being processed."

    def _land_bonus(self, batch: dict[str, Any], time: int) -> None:
        """One pay call's payments reach the submissions (`bonus_payments`) and the workspace is charged."""
        study = self.db.get("study", batch["study"])
        assert study is not None
        for n, line in enumerate(batch["lines"]):
            sub = self.db.get("submission", line["submission_id"])
            assert sub is not None
            sub["bonus_payments"].append(line["amount"])
            self.db.put("submission", sub)
            reward, fee, vat = self.split(line["amount"])
            self.db.charge(study["workspace"], study["id"], f"{batch['id']}:{time}:{n}", "bonus", reward, fee, vat,
                           self.clock.now())

    # -- participant groups -------------------------------------------------------------------------------
    def group(self, user: dict[str, Any], group_id: str) -> dict[str, Any]:
        g = self.db.get("group", group_id)
        if g is None or g["owner"] != user["id"] or g["is_deleted"]:
            raise not_found("Participant group")
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

    def list_groups(self, user: dict[str, Any], query: dict[str, str]) -> list[dict[str, Any]]:
        """The groups of a workspace (`workspace_id=`) or of a project (`project_id=`: its own and its
        workspace's); the description requires one of them. `active=false` lists the deleted ones."""
        if query.get("workspace_id"):
            ws_id, project_id = self._workspace(user, query["workspace_id"])["id"], None
        elif query.get("project_id"):
            project = self.project(user, query["project_id"])
            ws_id, project_id = project["workspace"], project["id"]
        else:
            raise ApiError(400, {"filter": ["Give workspace_id or project_id."]})
        deleted = query.get("active") == "false"
        return [self.group_out(g) for g in self.db.owned("group", user["id"])
                if g["workspace_id"] == ws_id and g.get("project_id") in (None, project_id) and g["is_deleted"] == deleted]

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
        return [{"participant_id": p, "datetime_created": iso(t)} for p, t in g["members"].items()]

    # -- participants (the emulator's side channel) ------------------------------------------------------
    def add_participant(self, *, country: str = "US", approval_rate: float = 99.0, approvals: int = 100,
                        languages: tuple[str, ...] = ("English",), age: int = 30,
                        external_id: str | None = None) -> tuple[str, str]:
        """A participant and the secret their simulated browser authenticates with.

        The profile is kept as Prolific keeps screener answers, as choice ids of the catalogue's filters:
        the country (ISO code or name) and the languages (names; the first is the first language) must be
        among its choices, or the sign-up is refused (400) naming what it does not know.

        With an `external_id` (the operator's own name for a simulated person) the same person is found
        again on later calls, e.g. after a restart of the crowd: same participant id, the profile updated,
        and a fresh secret, since only the secret's hash is kept and the caller lost the old one.
        """
        country_id = catalogue.country_choice(str(country))
        language_ids = [catalogue.language_choice(str(lang)) for lang in languages]
        unknown = ([f"country {country!r}"] if country_id is None else []) + [
            f"language {lang!r}" for lang, lid in zip(languages, language_ids, strict=True) if lid is None]
        if unknown or not language_ids:
            raise ApiError(400, {"profile": [f"no choice for {', '.join(unknown) or 'an empty language list'} "
                                             "in the emulator's filters (GET /api/v1/filters/)."]})
        ref = self.db.get("participant_ref", external_id) if external_id else None
        pid, secret = (ref["participant"] if ref else new_id()), secrets.token_urlsafe(24)
        self.db.put("participant", {"id": pid, "country": country_id, "approval_rate": approval_rate, "approvals": approvals,
                                    "languages": language_ids, "first_language": language_ids[0], "age": age,
                                    "secret_hash": token_hash(secret), **({"external_id": external_id} if external_id else {})})
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
        most = int(cfg.get("max_submissions_per_participant") or 1)
        concurrent = int(cfg.get("max_concurrent_submissions") or -1)
        if most != -1 and len(mine) >= most:
            return False
        # the whole study's active/reserved submissions, everyone's (the description's limit)
        return concurrent == -1 or sum(1 for s in subs if s["status"] in ("RESERVED", "ACTIVE")) < concurrent

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
        sub["status"], sub["returned_at"] = "RETURNED", self.clock.now()
        self._save_sub(sub)
        return {"status": sub["status"]}

    def my_submission(self, p: dict[str, Any], sub_id: str) -> dict[str, Any]:
        return self.submission_out(self._own_sub(p, sub_id))

    def my_submissions(self, p: dict[str, Any]) -> list[dict[str, Any]]:
        """A participant's own submissions, oldest first (Prolific's "Submissions" page)."""
        return [self.submission_out(s) for s in self.db.owned("submission", p["id"])]

    # -- time -------------------------------------------------------------------------------------------
    def _before_put(self, kind: str, doc: dict[str, Any]) -> None:
        """Every submission written with a new status is a hook event (`hooks.HookOperations.emit`)."""
        if kind == "submission":
            self.submission_changed(self.db.get("submission", doc["id"]), doc)

    def _written(self, kind: str) -> None:
        if kind in SWEPT_KINDS or kind == ROLLED_BACK:
            self._sweep_due = -math.inf

    def sweep(self) -> None:
        """Time-outs past `maximum_allowed_time` and Prolific's automatic approval of unreviewed work."""
        now = self.clock.now()
        if now < self._sweep_due:
            return
        due = math.inf
        for pay in self.db.all("bonus_pay"):
            due = min(due, float(pay["due"])) if now < pay["due"] else due
            if now >= pay["due"]:
                batch = self.db.get("bonus", pay["batch"])
                assert batch is not None
                self._land_bonus(batch, int(pay["time"]))
                self.db.delete("bonus_pay", pay["id"])
        for study in self.db.all("study"):
            if study["status"] == "UNPUBLISHED":
                continue  # a COMPLETED (stopped) study's submissions still time out and are approved automatically
            limit = 60.0 * int(study.get("maximum_allowed_time") or 0)
            changed = False
            for sub in self._subs(study["id"]):
                if sub["status"] == "ACTIVE" and limit and now > sub["started_at"] + limit:
                    sub["status"] = "TIMED-OUT"
                elif sub["status"] == "AWAITING REVIEW" and now > (sub["completed_at"] or now) + self.auto_approve_seconds:
                    self._log_transition(sub, "APPROVE", "prolific")
                    self._approve(sub)
                else:
                    if sub["status"] == "ACTIVE" and limit:
                        due = min(due, sub["started_at"] + limit)
                    elif sub["status"] == "AWAITING REVIEW":
                        due = min(due, (sub["completed_at"] or now) + self.auto_approve_seconds)
                    continue
                self.db.put("submission", sub)
                changed = True
            if changed:
                self._settle(study)
                self.db.put("study", study)
        self._sweep_due = due  # the writes above reset it; what they changed is settled now


Handler = Callable[..., Any]
