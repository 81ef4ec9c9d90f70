"""The emulator's filter catalogue: what `GET /filters/` lists and the only ids a study's filters may use.

Prolific's select filters take the ids of their `choices` (`{"1": "United Kingdom", ...}`), never the
text or an ISO code; range filters take `selected_range` within `min`..`max`; id filters (groups,
previous studies, participants) take ids of those objects. The emulator's choices are its own, ids in
the description's sequential-integer style, and a participant's profile is kept as these ids, as
Prolific keeps the answers to its screener questions.
"""

from __future__ import annotations

from typing import Any

# (ISO 3166 code, label) of the countries the emulator's participants may live in: the countries
# Prolific recruits in (its participant help pages), in a fixed order that gives the choice ids.
COUNTRIES: tuple[tuple[str, str], ...] = (
    ("GB", "United Kingdom"), ("US", "United States"), ("CA", "Canada"), ("AU", "Australia"), ("NZ", "New Zealand"),
    ("IE", "Ireland"), ("DE", "Germany"), ("FR", "France"), ("ES", "Spain"), ("IT", "Italy"), ("PT", "Portugal"),
    ("NL", "Netherlands"), ("BE", "Belgium"), ("AT", "Austria"), ("CH", "Switzerland"), ("DK", "Denmark"),
    ("SE", "Sweden"), ("NO", "Norway"), ("FI", "Finland"), ("PL", "Poland"), ("CZ", "Czech Republic"),
    ("HU", "Hungary"), ("GR", "Greece"), ("SI", "Slovenia"), ("EE", "Estonia"), ("LV", "Latvia"),
    ("MX", "Mexico"), ("CL", "Chile"), ("ZA", "South Africa"), ("IL", "Israel"), ("JP", "Japan"), ("KR", "South Korea"),
)
LANGUAGES: tuple[str, ...] = (
    "English", "German", "French", "Spanish", "Italian", "Portuguese", "Dutch", "Polish", "Swedish", "Danish",
    "Norwegian", "Finnish", "Greek", "Czech", "Hungarian", "Hebrew", "Japanese", "Korean", "Mandarin", "Hindi", "Arabic",
)
COUNTRY_CHOICES = {str(n): label for n, (_iso, label) in enumerate(COUNTRIES, 1)}
LANGUAGE_CHOICES = {str(n): label for n, label in enumerate(LANGUAGES, 1)}

#: select filter id -> (profile field, its choices)
SELECT: dict[str, tuple[str, dict[str, str]]] = {
    "current-country-of-residence": ("country", COUNTRY_CHOICES),
    "fluent-languages": ("languages", LANGUAGE_CHOICES),
    "first-language": ("first_language", LANGUAGE_CHOICES),
}
#: range filter id -> (profile field, min, max)
RANGE: dict[str, tuple[str, int, int]] = {
    "approval_rate": ("approval_rate", 0, 100),
    "approval_numbers": ("approvals", 0, 100_000),
    "age": ("age", 18, 100),
}
#: id filter -> the data type of its values (as `GET /filters/` names it)
ID_FILTERS: dict[str, str] = {
    "participant_group_allowlist": "ParticipantGroupID", "participant_group_blocklist": "ParticipantGroupID",
    "previous_studies_allowlist": "StudyID", "previous_studies_blocklist": "StudyID",
    "custom_allowlist": "ParticipantID", "custom_blocklist": "ParticipantID",
}
TITLES = {"current-country-of-residence": "Current Country of Residence", "fluent-languages": "Fluent languages",
          "first-language": "First language", "approval_rate": "Approval Rate", "approval_numbers": "Approval Numbers",
          "age": "Age", "participant_group_allowlist": "Custom Group Allowlist",
          "participant_group_blocklist": "Custom Group Blocklist", "previous_studies_allowlist": "Previous Studies Allowlist",
          "previous_studies_blocklist": "Previous Studies Blocklist", "custom_allowlist": "Custom Allowlist",
          "custom_blocklist": "Custom Blocklist"}


def listing(id_choices: dict[str, dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """`GET /filters/`'s results; `id_choices` gives the id filters' choices in a workspace (its groups,
    its studies), as Prolific lists them when asked with `workspace_id`."""
    out: list[dict[str, Any]] = []
    for fid, (_field, choices) in SELECT.items():
        out.append({"filter_id": fid, "title": TITLES[fid], "description": "", "type": "select",
                    "question": f"{TITLES[fid]}?", "choices": dict(choices), "data_type": "ChoiceID"})
    for fid, (_field, lo, hi) in RANGE.items():
        out.append({"filter_id": fid, "title": TITLES[fid], "description": "", "type": "range",
                    "question": f"{TITLES[fid]}?", "min": lo, "max": hi, "data_type": "integer"})
    for fid, kind in ID_FILTERS.items():
        out.append({"filter_id": fid, "title": TITLES[fid], "description": "", "type": "select",
                    "question": "", "choices": dict((id_choices or {}).get(fid, {})), "data_type": kind})
    return out


def country_choice(value: str) -> str | None:
    """The choice id of a country given as its ISO code, its label or its choice id."""
    v = value.strip()
    for n, (iso, label) in enumerate(COUNTRIES, 1):
        if v.upper() == iso or v.casefold() == label.casefold() or v == str(n):
            return str(n)
    return None


def language_choice(value: str) -> str | None:
    v = value.strip()
    for n, label in enumerate(LANGUAGES, 1):
        if v.casefold() == label.casefold() or v == str(n):
            return str(n)
    return None
