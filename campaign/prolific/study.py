"""What a campaign stage becomes on Prolific: the study's fields, its pay and what a place costs.

Pure functions over a `ProlificConfig` (the spec's `prolific:` block), so the money rules can be tested
without a server: the reward is per submission (a bundle of HITs), or per hour and turned into a
reward for the estimated time; either way it must meet Prolific's minimum hourly pay. A place costs
the reward plus the service fee plus VAT on the fee, the figure the ledger reserves before publishing.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from typing import Any

from campaign.prolific.filters import COUNTRY_FILTER, LANGUAGE_FILTER, country_ids, language_ids

# Prolific's published minimum hourly pay (help centre, 2025): GBP 6.00 / USD 8.00.
MINIMUM_HOURLY = {"GBP": Decimal("6.00"), "USD": Decimal("8.00")}
CENT = Decimal("0.01")


@dataclass(frozen=True)
class ProlificConfig:
    public_url: str  # where participants reach the task site (https behind a reverse proxy)
    bundle: int = 10  # HITs per submission
    estimated_minutes: int = 10
    maximum_minutes: int | None = None
    reward: Decimal | None = None  # per submission, major units of `currency`
    reward_per_hour: Decimal | None = None
    currency: str = "GBP"
    fee_rate: Decimal = Decimal("0.333")  # the published percentage could not be confirmed: set it
    vat_rate: Decimal = Decimal("0")  # VAT on the fee (UK workspaces: 0.2)
    devices: tuple[str, ...] = ("desktop",)
    approval_rate: int | None = 95
    countries: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()
    block_list: str | None = None  # a participant group used as a block list
    workspace: str | None = None
    project: str | None = None
    completion_url: str = "https://app.prolific.com/submissions/complete"
    extra_filters: tuple[dict[str, object], ...] = field(default_factory=tuple)
    # exceptionally fast (rejected TOO_QUICKLY): under this share of the study's expected time
    # (`campaign.prolific.checks.too_quick`); 0 or None: never
    too_quick: Decimal | None = Decimal("0.2")
    pilot: int | None = None  # places run first, then the campaign pauses with a summary (`campaign.steps.pilot`)


def reward_per_submission(cfg: ProlificConfig) -> Decimal:
    """The reward of one submission, checked against the minimum hourly pay for its estimated time."""
    if (cfg.reward is None) == (cfg.reward_per_hour is None):
        raise ValueError("give exactly one of prolific.reward (per submission) and prolific.reward_per_hour")
    if cfg.estimated_minutes < 1:
        raise ValueError("prolific.estimated_minutes must be at least 1")
    if cfg.reward is not None:
        reward = Decimal(cfg.reward).quantize(CENT, rounding=ROUND_HALF_UP)
    else:
        reward = (Decimal(cfg.reward_per_hour or 0) * cfg.estimated_minutes / 60).quantize(CENT, rounding=ROUND_CEILING)
    floor = MINIMUM_HOURLY.get(cfg.currency)
    if floor is not None:
        hourly = reward * 60 / cfg.estimated_minutes
        if hourly < floor:
            least = (floor * cfg.estimated_minutes / 60).quantize(CENT, rounding=ROUND_CEILING)
            raise ValueError(f"prolific reward {reward} {cfg.currency} for {cfg.estimated_minutes} min is "
                             f"{hourly.quantize(CENT)} {cfg.currency}/hour, below Prolific's minimum of {floor}/hour: "
                             f"pay at least {least} per submission")
    return reward


def payment_cost(cfg: ProlificConfig, amount: Decimal) -> Decimal:
    """One payment (a reward or a bonus) with its fee and the VAT on the fee, each rounded to minor units
    as Prolific rounds them."""
    fee = (amount * cfg.fee_rate).quantize(CENT, rounding=ROUND_HALF_UP)
    return amount + fee + (fee * cfg.vat_rate).quantize(CENT, rounding=ROUND_HALF_UP)


def place_cost(cfg: ProlificConfig) -> Decimal:
    """What the ledger reserves for one place: the submission's reward with fee and VAT."""
    return payment_cost(cfg, reward_per_submission(cfg))


def work_pay(cfg: ProlificConfig, hits: int) -> Decimal:
    """The pay for `hits` HITs of a bundle that was not completed (the participant returned the place, or
    it timed out): the reward's share per HIT, rounded to the penny, so a shorter bundle costs what
    its work is worth and a whole bundle what a place costs."""
    return (reward_per_submission(cfg) * hits / cfg.bundle).quantize(CENT, rounding=ROUND_HALF_UP)


def bonus_cost(cfg: ProlificConfig, amount: Decimal) -> Decimal:
    return payment_cost(cfg, amount)


def study_url(cfg: ProlificConfig, seat: str) -> str:
    """The task site's entry for one study, with Prolific's three placeholders (kept unescaped)."""
    base = cfg.public_url.rstrip("/") + "/prolific/start"
    query = urllib.parse.urlencode({"seat": seat})
    return (f"{base}?{query}&PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}&STUDY_ID={{{{%STUDY_ID%}}}}"
            f"&SESSION_ID={{{{%SESSION_ID%}}}}")


def filters(cfg: ProlificConfig, block_group_id: str | None,
            catalogue: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, object]]:
    """The study's filters; countries and languages as the choice ids of `catalogue` (`GET /filters/`),
    which they need (`campaign.prolific.filters`: a name without a choice raises, naming it)."""
    out: list[dict[str, object]] = []
    if (cfg.countries or cfg.languages) and catalogue is None:
        raise ValueError("countries and languages are sent as Prolific's choice ids: give the filter catalogue")
    if cfg.approval_rate is not None:
        out.append({"filter_id": "approval_rate", "selected_range": {"lower": cfg.approval_rate, "upper": 100}})
    if cfg.countries:
        out.append({"filter_id": COUNTRY_FILTER, "selected_values": country_ids(catalogue or [], cfg.countries)})
    if cfg.languages:
        out.append({"filter_id": LANGUAGE_FILTER, "selected_values": language_ids(catalogue or [], cfg.languages)})
    if block_group_id:
        out.append({"filter_id": "participant_group_blocklist", "selected_values": [block_group_id]})
    out.extend(dict(f) for f in cfg.extra_filters)
    return out


def study_body(cfg: ProlificConfig, *, name: str, description: str, internal_name: str, places: int,
               completion_code: str, seat: str, project_id: str | None, block_group_id: str | None,
               catalogue: Sequence[Mapping[str, Any]] | None = None) -> dict[str, object]:
    """The fields of `POST /studies/` for one stage (or ranking batch); a draft until published.

    `max_concurrent_submissions` is the whole study's limit on active and reserved submissions (not a
    participant's): -1, no limit beyond the places, which already bound how many work at once (the task
    site serves each participant one bundle at a time)."""
    reward = reward_per_submission(cfg)
    body: dict[str, object] = {
        "name": name, "description": description, "internal_name": internal_name,
        "external_study_url": study_url(cfg, seat), "prolific_id_option": "url_parameters",
        "completion_codes": [{"code": completion_code, "code_type": "COMPLETED", "actor": "participant",
                              "actions": [{"action": "MANUALLY_REVIEW"}]}],
        "total_available_places": places, "estimated_completion_time": cfg.estimated_minutes,
        "reward": int(reward * 100), "device_compatibility": list(cfg.devices),
        "filters": filters(cfg, block_group_id, catalogue),
        "submissions_config": {"max_submissions_per_participant": -1, "max_concurrent_submissions": -1},
    }
    if cfg.maximum_minutes is not None:
        body["maximum_allowed_time"] = cfg.maximum_minutes
    if project_id:
        body["project"] = project_id
    return body
