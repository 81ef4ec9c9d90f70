"""A stage as a Prolific study: pay checked against the minimum, what a place costs, the study fields."""

from __future__ import annotations

from decimal import Decimal

import pytest

from campaign.prolific.filters import FilterChoiceError
from campaign.prolific.study import ProlificConfig, bonus_cost, filters, place_cost, reward_per_submission, study_body

URL = "https://tasks.example.org"
# `GET /filters/` as Prolific answers it (choice ids are Prolific's own, not ISO codes)
CATALOGUE = [{"filter_id": "current-country-of-residence", "type": "select",
              "choices": {"3": "United States", "7": "United Kingdom", "12": "France"}},
             {"filter_id": "fluent-languages", "type": "select", "choices": {"1": "English", "2": "French"}}]


def test_reward_per_hour_and_the_minimum() -> None:
    assert reward_per_submission(ProlificConfig(URL, estimated_minutes=10, reward_per_hour=Decimal("9.00"))) == Decimal("1.50")
    assert reward_per_submission(ProlificConfig(URL, estimated_minutes=7, reward_per_hour=Decimal("9.00"))) == Decimal("1.05")
    with pytest.raises(ValueError, match="below Prolific's minimum of 6.00/hour: pay at least 1.00"):
        reward_per_submission(ProlificConfig(URL, estimated_minutes=10, reward=Decimal("0.90")))
    with pytest.raises(ValueError, match="USD/hour"):
        reward_per_submission(ProlificConfig(URL, estimated_minutes=10, reward=Decimal("1.20"), currency="USD"))
    with pytest.raises(ValueError, match="exactly one"):
        reward_per_submission(ProlificConfig(URL, reward=Decimal("2"), reward_per_hour=Decimal("12")))


def test_place_and_bonus_cost_round_like_minor_units() -> None:
    cfg = ProlificConfig(URL, estimated_minutes=10, reward=Decimal("1.00"), fee_rate=Decimal("0.333"), vat_rate=Decimal("0.2"))
    assert place_cost(cfg) == Decimal("1.40")  # 1.00 + 0.33 fee + 0.07 VAT (the emulator charges 100 + 33 + 7)
    assert bonus_cost(cfg, Decimal("0.25")) == Decimal("0.35")  # 25 + 8 + 2


def test_study_body_has_the_placeholders_and_filters() -> None:
    cfg = ProlificConfig(URL + "/", estimated_minutes=10, reward=Decimal("1.50"), countries=("US", "GB"), maximum_minutes=45)
    body = study_body(cfg, name="Rate statements", description="d", internal_name="camp/likert", places=12,
                      completion_code="C1", seat="camp.likert.0", project_id="p" * 24, block_group_id="g" * 24,
                      catalogue=CATALOGUE)
    url = str(body["external_study_url"])
    assert url.startswith(URL + "/prolific/start?seat=camp.likert.0&")
    for ph in ("{{%PROLIFIC_PID%}}", "{{%STUDY_ID%}}", "{{%SESSION_ID%}}"):
        assert ph in url
    assert body["reward"] == 150 and body["total_available_places"] == 12 and body["maximum_allowed_time"] == 45
    ids = [f["filter_id"] for f in body["filters"]]  # type: ignore[attr-defined]
    assert ids == ["approval_rate", "current-country-of-residence", "participant_group_blocklist"]
    assert body["filters"][1]["selected_values"] == ["3", "7"]  # type: ignore[index]  # choice ids, not ISO codes


def test_the_whole_study_is_not_limited_to_one_participant_at_a_time() -> None:
    """`max_concurrent_submissions` limits the whole study's active submissions: 1 would let one person
    work at a time on the entire study."""
    body = study_body(ProlificConfig(URL, reward=Decimal("1.50")), name="n", description="d", internal_name="i", places=5,
                      completion_code="C", seat="s", project_id=None, block_group_id=None)
    assert body["submissions_config"]["max_concurrent_submissions"] == -1  # type: ignore[index]


def test_filter_names_are_sent_as_choice_ids_and_a_name_without_a_choice_is_named() -> None:
    cfg = ProlificConfig(URL, reward=Decimal("1.50"), countries=("GB", "BR"), languages=("English", "Klingon"))
    with pytest.raises(FilterChoiceError, match="BR has no choice in Prolific's 'current-country-of-residence'"):
        filters(cfg, None, CATALOGUE)
    cfg = ProlificConfig(URL, reward=Decimal("1.50"), countries=("GB",), languages=("english", "Klingon"))
    with pytest.raises(FilterChoiceError, match="Klingon has no choice in Prolific's 'fluent-languages'"):
        filters(cfg, None, CATALOGUE)
    cfg = ProlificConfig(URL, reward=Decimal("1.50"), countries=("GB",), languages=("english",), approval_rate=None)
    assert filters(cfg, None, CATALOGUE) == [{"filter_id": "current-country-of-residence", "selected_values": ["7"]},
                                             {"filter_id": "fluent-languages", "selected_values": ["1"]}]
    with pytest.raises(ValueError, match="choice ids"):
        filters(cfg, None)  # never the names themselves
