"""A study's filters from the spec's names: `countries: [GB, US]` and `languages: [English]` are sent as the
choice ids Prolific lists in `GET /filters/` (a select filter takes nothing else), looked up by the
choice's text; a name no choice matches is refused, naming it and the filter, before any study exists.

Countries are ISO 3166 codes in the spec and names in Prolific's choices, so each code is matched by its
English names below (the countries Prolific recruits in) or by the code itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

COUNTRY_FILTER = "current-country-of-residence"
LANGUAGE_FILTER = "fluent-languages"

COUNTRY_NAMES: dict[str, tuple[str, ...]] = {
    "GB": ("United Kingdom", "UK", "Great Britain"), "US": ("United States", "United States of America", "USA"),
    "CA": ("Canada",), "AU": ("Australia",), "NZ": ("New Zealand",), "IE": ("Ireland",), "DE": ("Germany",),
    "FR": ("France",), "ES": ("Spain",), "IT": ("Italy",), "PT": ("Portugal",), "NL": ("Netherlands", "The Netherlands"),
    "BE": ("Belgium",), "AT": ("Austria",), "CH": ("Switzerland",), "DK": ("Denmark",), "SE": ("Sweden",),
    "NO": ("Norway",), "FI": ("Finland",), "PL": ("Poland",), "CZ": ("Czech Republic", "Czechia"), "HU": ("Hungary",),
    "GR": ("Greece",), "SI": ("Slovenia",), "EE": ("Estonia",), "LV": ("Latvia",), "LT": ("Lithuania",),
    "MX": ("Mexico",), "CL": ("Chile",), "ZA": ("South Africa",), "IL": ("Israel",), "JP": ("Japan",),
    "KR": ("South Korea", "Korea, Republic of"),
}


class FilterChoiceError(ValueError):
    """A spec's filter name that Prolific's catalogue has no choice for (the message names it)."""


def _choices(catalogue: Sequence[Mapping[str, Any]], filter_id: str) -> dict[str, str]:
    for f in catalogue:
        if f.get("filter_id") == filter_id:
            raw = f.get("choices")
            return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}
    raise FilterChoiceError(f"Prolific lists no filter {filter_id!r} (GET /filters/)")


def choice_ids(catalogue: Sequence[Mapping[str, Any]], filter_id: str, names: Iterable[str],
               aliases: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The choice id of each name (matched case-insensitively against the choices' text, through
    `aliases` first); every name without a choice is named in one error."""
    choices = _choices(catalogue, filter_id)
    by_text = {text.casefold(): cid for cid, text in choices.items()}
    out: list[str] = []
    missing: list[str] = []
    for name in names:
        wanted = [*(aliases or {}).get(name.upper() if aliases else name, ()), name]
        found = next((by_text[w.casefold()] for w in wanted if w.casefold() in by_text), None)
        if found is None:
            missing.append(name)
        elif found not in out:
            out.append(found)
    if missing:
        sample = ", ".join(sorted(choices.values())[:12])
        raise FilterChoiceError(f"prolific.filters: {', '.join(missing)} {'has' if len(missing) == 1 else 'have'} no choice in "
                                f"Prolific's {filter_id!r} filter (its choices include: {sample or 'none'})")
    return out


def country_ids(catalogue: Sequence[Mapping[str, Any]], codes: Iterable[str]) -> list[str]:
    return choice_ids(catalogue, COUNTRY_FILTER, codes, COUNTRY_NAMES)


def language_ids(catalogue: Sequence[Mapping[str, Any]], names: Iterable[str]) -> list[str]:
    return choice_ids(catalogue, LANGUAGE_FILTER, names)
