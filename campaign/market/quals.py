"""Qualification requirements: shape rules at HIT creation, and whether a worker meets them.

Pure functions over a worker's qualification values, so the rules (comparators, locales, the
Discover/Preview/Accept guard ladder) are testable without a server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

LOCALE = "00000000000000000071"
PERCENT_APPROVED = "000000000000000000L0"
NUMBER_APPROVED = "00000000000000000040"
ADULT = "00000000000000000060"
MASTERS_IDS = frozenset({
    "2F1QJWKUDD8XADTFD2Q0G6UTO95ALH", "2ARFPLSP75KLA8M8DH1HTEQVJT3SY6",  # Masters prod / sandbox
    "2NDP2L92HECWY8NS8H3CK0CP5L9GHO", "2F1KVCNHMVHV8E9PBUB2A4J79LU20F",  # Categorization Masters
    "21VZU98JHSTLZ5BPP4A9NOBJEK3DPG", "2TGBB6BFMFFOM08IBMAFGGESC1UWJX",  # Photo Moderation Masters
})
SYSTEM_IDS = frozenset({LOCALE, PERCENT_APPROVED, NUMBER_APPROVED, ADULT}) | MASTERS_IDS
SYSTEM_NAMES = {
    LOCALE: "Worker_Locale", PERCENT_APPROVED: "Worker_PercentAssignmentsApproved",
    NUMBER_APPROVED: "Worker_NumberHITsApproved", ADULT: "Worker_Adult",
    "2F1QJWKUDD8XADTFD2Q0G6UTO95ALH": "Masters", "2ARFPLSP75KLA8M8DH1HTEQVJT3SY6": "Masters (sandbox)",
    "2NDP2L92HECWY8NS8H3CK0CP5L9GHO": "Categorization Masters", "2F1KVCNHMVHV8E9PBUB2A4J79LU20F": "Categorization Masters (sandbox)",
    "21VZU98JHSTLZ5BPP4A9NOBJEK3DPG": "Photo Moderation Masters",
    "2TGBB6BFMFFOM08IBMAFGGESC1UWJX": "Photo Moderation Masters (sandbox)",
}

# Which actions each ActionsGuarded value guards; no value (and RequiredToPreview false) guards Accept only.
GUARDS = {
    "Accept": frozenset({"accept"}),
    "PreviewAndAccept": frozenset({"preview", "accept"}),
    "DiscoverPreviewAndAccept": frozenset({"discover", "preview", "accept"}),
}
INT_COMPARATORS = {
    "LessThan": lambda v, x: v < x, "LessThanOrEqualTo": lambda v, x: v <= x,
    "GreaterThan": lambda v, x: v > x, "GreaterThanOrEqualTo": lambda v, x: v >= x,
    "EqualTo": lambda v, x: v == x, "NotEqualTo": lambda v, x: v != x,
}


def requirement_problem(req: Mapping[str, Any]) -> str | None:
    """Why a requirement is malformed (MTurk answers InvalidParameterValue), or None."""
    comp = req["Comparator"]
    ints = req.get("IntegerValues") or []
    locs = req.get("LocaleValues") or []
    qid = req["QualificationTypeId"]
    if req.get("RequiredToPreview") is not None and req.get("ActionsGuarded") is not None:
        return "RequiredToPreview and ActionsGuarded cannot be used together"
    if comp in ("Exists", "DoesNotExist"):
        if ints or locs:
            return f"Comparator {comp} takes no values"
        return None
    if qid == LOCALE:
        if ints:
            return "The locale qualification takes LocaleValues, not IntegerValues"
        if comp in ("EqualTo", "NotEqualTo"):
            return None if len(locs) == 1 else f"Comparator {comp} takes exactly one LocaleValue"
        if comp in ("In", "NotIn"):
            return None if 1 <= len(locs) <= 30 else f"Comparator {comp} takes 1 to 30 LocaleValues"
        return f"Comparator {comp} is not supported for the locale qualification"
    if locs:
        return "LocaleValues are only valid for the locale qualification"
    if comp in ("In", "NotIn"):
        return None if 1 <= len(ints) <= 15 else f"Comparator {comp} takes 1 to 15 IntegerValues"
    return None if len(ints) == 1 else f"Comparator {comp} takes exactly one IntegerValue"


def guarded(req: Mapping[str, Any]) -> frozenset[str]:
    if req.get("ActionsGuarded"):
        return GUARDS[req["ActionsGuarded"]]
    if req.get("RequiredToPreview"):
        return GUARDS["PreviewAndAccept"]
    return GUARDS["Accept"]


def meets(req: Mapping[str, Any], value: Any) -> bool:
    """`value` is the worker's int, a locale dict {Country, Subdivision}, or None when lacking it."""
    comp = req["Comparator"]
    if comp == "Exists":
        return value is not None
    if comp == "DoesNotExist":
        return value is None
    if value is None:
        return False  # a worker lacking the qualification meets only DoesNotExist
    if isinstance(value, dict):
        hits = [_locale_match(value, loc) for loc in req.get("LocaleValues") or []]
        if comp in ("EqualTo", "In"):
            return any(hits)
        return not any(hits)
    ints = req.get("IntegerValues") or []
    if comp == "In":
        return value in ints
    if comp == "NotIn":
        return value not in ints
    return INT_COMPARATORS[comp](value, ints[0])


def _locale_match(worker: Mapping[str, Any], loc: Mapping[str, Any]) -> bool:
    if worker.get("Country") != loc.get("Country"):
        return False
    return not loc.get("Subdivision") or worker.get("Subdivision") == loc.get("Subdivision")


def allowed(reqs: Sequence[Mapping[str, Any]], values: Mapping[str, Any], action: str) -> bool:
    """All requirements guarding `action` ("discover" | "preview" | "accept") must hold."""
    return all(meets(r, values.get(r["QualificationTypeId"])) for r in reqs if action in guarded(r))


def is_masters(reqs: Sequence[Mapping[str, Any]]) -> bool:
    return any(r["QualificationTypeId"] in MASTERS_IDS for r in reqs)
