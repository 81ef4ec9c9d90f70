"""What the Prolific account says about money and where studies go, read from the service before the
first study of a campaign is created: the workspace and project the study is created in, the
workspace's currency, and the service fee and VAT the account is charged.

Why read them: the spec's `prolific.fee_rate` / `vat_rate` are an assumption (the published fee could
not be confirmed, VAT depends on the workspace), good enough for `campaign validate`'s estimate; what a
study really costs is the account's business. Prolific's API description offers:

- `GET /workspaces/{id}/` (404: no such workspace for this token) and `GET /workspaces/{id}/balance/`,
  whose `currency_code` is "the currency used for all financial transactions within the workspace";
- `GET /workspaces/{id}/projects/`, `GET /projects/{id}/` (a project belongs to one workspace);
- `GET /users/me/`, whose real payload carries `fees_percentage` and `vat_percentage` (the reference's
  corrections; the description guarantees only `id` and `email`);
- `POST /study-cost-calculator/` `{reward, total_available_places}` -> `total_cost`, "including VAT and
  fees ... We use your account VAT and Fee percentage": the price of one place, the figure the ledger
  reserves, straight from the service.

A workspace that does not exist, a project outside it, or a workspace whose currency is not the spec's
`prolific.currency` is an `AccountMismatch`: the campaign is blocked before any study exists (a study in
the wrong currency would be paid in money the budget does not count). Figures that merely differ from
the spec's assumption are `notes`: the service's are used, and the caller writes the notes as warnings.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import Any

from campaign.prolific.client import ProlificClient, ProlificError
from campaign.prolific.study import ProlificConfig, payment_cost, reward_per_submission

HUNDRED = Decimal(100)


class AccountMismatch(Exception):
    """The account cannot run the campaign as specified (its message says what and where); nothing was
    created on Prolific."""


@dataclass(frozen=True)
class Account:
    workspace_id: str
    workspace_title: str
    project_id: str
    currency: str
    fee_rate: Decimal  # the account's service fee, a fraction of each payment
    vat_rate: Decimal  # VAT on the fee, a fraction of the fee
    place_minor: int  # the study cost calculator's price of one place (reward + fee + VAT), minor units
    notes: tuple[str, ...] = ()  # where the account's figures differ from the spec's assumption

    def config(self, cfg: ProlificConfig) -> ProlificConfig:
        """`cfg` with the account's workspace, project and rates: what the ledger and the studies use."""
        return replace(cfg, fee_rate=self.fee_rate, vat_rate=self.vat_rate, workspace=self.workspace_id,
                       project=self.project_id)

    @property
    def place_total(self) -> Decimal:
        return Decimal(self.place_minor) / HUNDRED


def percent(rate: Decimal) -> str:
    """0.25 -> "25", 0.333 -> "33.3": a rate as the percentage Prolific shows."""
    return f"{(rate * HUNDRED).normalize():f}"


def _seg(value: str) -> str:
    """An id from the spec as one path segment (a slash or '?' in it cannot reach another operation)."""
    return urllib.parse.quote(value, safe="")


def _missing(exc: ProlificError) -> bool:
    return exc.status in (400, 403, 404)


def _percentage(value: Any) -> Decimal | None:
    """A percentage of `users/me/` (a number, or a string such as `service_margin_percentage`) as a fraction."""
    if value is None or isinstance(value, bool):
        return None
    try:
        out = Decimal(str(value)) / HUNDRED
    except (InvalidOperation, ValueError):
        return None
    return out if out.is_finite() and Decimal(0) <= out <= Decimal(1) else None


def _workspace(api: ProlificClient, cfg: ProlificConfig) -> dict[str, Any]:
    if cfg.workspace:
        try:
            return api.request("GET", f"workspaces/{_seg(cfg.workspace)}/")
        except ProlificError as exc:
            if not _missing(exc):
                raise
            known = ", ".join(f"{w.get('id')} ({w.get('title')!r})" for w in api.workspaces()) or "none"
            raise AccountMismatch(f"prolific.workspace: workspace {cfg.workspace!r} does not exist for this API token "
                                  f"(Prolific answered {exc.status}); the token's workspaces: {known}") from None
    found = api.workspaces()
    if not found:
        raise AccountMismatch("prolific.workspace: this API token has no workspace on Prolific: create one and name it")
    return found[0]


def _project(api: ProlificClient, cfg: ProlificConfig, ws: dict[str, Any]) -> str:
    ws_id = str(ws["id"])
    if cfg.project:
        try:
            project = api.request("GET", f"projects/{_seg(cfg.project)}/")
        except ProlificError as exc:
            if not _missing(exc):
                raise
            raise AccountMismatch(f"prolific.project: project {cfg.project!r} does not exist for this API token "
                                  f"(Prolific answered {exc.status})") from None
        if str(project.get("workspace")) != ws_id:
            raise AccountMismatch(f"prolific.project: project {cfg.project!r} is in workspace {project.get('workspace')!r}, "
                                  f"not in workspace {ws_id!r} ({ws.get('title')!r}) where the studies go")
        return str(cfg.project)
    projects = api.projects(ws_id)
    if projects:
        return str(projects[0]["id"])
    return str(api.create_project(ws_id, "campaign")["id"])


def read_account(api: ProlificClient, cfg: ProlificConfig) -> Account:
    """The account's workspace, project, currency and rates for a campaign with settings `cfg`; raises
    `AccountMismatch` (nothing created) or `ProlificError` (the service did not answer)."""
    if cfg.project and not cfg.workspace:  # the project names its workspace
        try:
            owner = api.request("GET", f"projects/{_seg(cfg.project)}/").get("workspace")
        except ProlificError as exc:
            if not _missing(exc):
                raise
            raise AccountMismatch(f"prolific.project: project {cfg.project!r} does not exist for this API token "
                                  f"(Prolific answered {exc.status})") from None
        cfg = replace(cfg, workspace=str(owner))
    ws = _workspace(api, cfg)
    ws_id, title = str(ws["id"]), str(ws.get("title") or "")
    currency = str(api.balance(ws_id).get("currency_code") or ws.get("currency_code") or "")
    if currency != cfg.currency:
        raise AccountMismatch(f"prolific.currency is {cfg.currency}, but workspace {ws_id} ({title!r}) pays in {currency}: "
                              f"its studies would be paid and charged in {currency}; set prolific.currency: {currency} "
                              "(and the budget in that currency) or name a workspace in "
                              f"{cfg.currency} as prolific.workspace")
    project_id = _project(api, cfg, ws)

    notes: list[str] = []
    me = api.me()
    fee, vat = _percentage(me.get("fees_percentage")), _percentage(me.get("vat_percentage"))
    if fee is None:
        fee = cfg.fee_rate
        notes.append(f"the account does not state its service fee (GET /users/me/ has no fees_percentage): "
                     f"prolific.fee_rate {cfg.fee_rate} is assumed")
    elif fee != cfg.fee_rate:
        notes.append(f"the account's service fee is {percent(fee)}% (GET /users/me/), not prolific.fee_rate "
                     f"{cfg.fee_rate}: the ledger uses the account's")
    if vat is None:
        vat = cfg.vat_rate
        notes.append(f"the account does not state its VAT (GET /users/me/ has no vat_percentage): prolific.vat_rate "
                     f"{cfg.vat_rate} is assumed")
    elif vat != cfg.vat_rate:
        notes.append(f"the account's VAT on the fee is {percent(vat)}% (GET /users/me/), not prolific.vat_rate "
                     f"{cfg.vat_rate}: the ledger uses the account's")
    reward = reward_per_submission(cfg)
    place_minor = api.cost(int(reward * 100), 1)
    by_rates = payment_cost(replace(cfg, fee_rate=fee, vat_rate=vat), reward)
    if Decimal(place_minor) != by_rates * 100:
        notes.append(f"Prolific's study cost calculator prices a place of {reward} at {Decimal(place_minor) / HUNDRED} "
                     f"{currency}, the account's rates give {by_rates}: the ledger reserves the calculator's figure")
    return Account(ws_id, title, project_id, currency, fee, vat, int(place_minor), tuple(notes))


def study_cost_minor(answer: dict[str, Any]) -> int:
    """Everything `GET /studies/{id}/cost/` says the study was charged (rewards and bonuses, each with its
    fees and tax), in minor units."""
    total = Decimal(0)
    for part in ("rewards", "bonuses"):
        for leaf in ("rewards", "fees", "tax"):
            total += Decimal(str(((answer.get(part) or {}).get(leaf) or {}).get("amount") or 0))
    return int(total)
