"""The spec's readable qualification requirements as MTurk QualificationRequirements.

System qualification ids are the same in the sandbox and production except Masters. Requirements
guard discovery, preview and accept alike, so workers who cannot take a HIT never see it.
"""

from __future__ import annotations

from typing import Any

LOCALE = "00000000000000000071"
PERCENT_APPROVED = "000000000000000000L0"
NUMBER_APPROVED = "00000000000000000040"
MASTERS = {False: "2F1QJWKUDD8XADTFD2Q0G6UTO95ALH", True: "2ARFPLSP75KLA8M8DH1HTEQVJT3SY6"}  # keyed by sandbox
GUARD = "DiscoverPreviewAndAccept"


def _locale(code: str) -> dict[str, str]:
    country, _, sub = code.partition("-")
    return {"Country": country, **({"Subdivision": sub} if sub else {})}


def requirements(q: Any, sandbox: bool, custom_ids: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """`q` is a `campaign.spec.Qualifications`. Custom types are named in the spec; `custom_ids` maps
    names to the ids the marketplace gave them (types not in it are left out, which the caller reports)."""
    out: list[dict[str, Any]] = []
    if q.locales:
        out.append({"QualificationTypeId": LOCALE, "Comparator": "EqualTo" if len(q.locales) == 1 else "In",
                    "LocaleValues": [_locale(c) for c in q.locales], "ActionsGuarded": GUARD})
    if q.approval_rate is not None:
        out.append({"QualificationTypeId": PERCENT_APPROVED, "Comparator": "GreaterThanOrEqualTo",
                    "IntegerValues": [int(q.approval_rate)], "ActionsGuarded": GUARD})
    if q.approved_hits is not None:
        out.append({"QualificationTypeId": NUMBER_APPROVED, "Comparator": "GreaterThanOrEqualTo",
                    "IntegerValues": [int(q.approved_hits)], "ActionsGuarded": GUARD})
    if q.masters:
        out.append({"QualificationTypeId": MASTERS[bool(sandbox)], "Comparator": "Exists", "ActionsGuarded": GUARD})
    for name, comparator, value in q.custom:
        type_id = (custom_ids or {}).get(name)
        if type_id is None:
            continue
        req: dict[str, Any] = {"QualificationTypeId": type_id, "Comparator": comparator, "ActionsGuarded": GUARD}
        if comparator not in ("Exists", "DoesNotExist"):
            req["IntegerValues"] = [int(value)]
        out.append(req)
    return out
