"""The emulator follows the description's rules where the old emulator was lenient exactly where the
client was wrong: concurrency is the whole study's, select filters take choice ids from `GET /filters/`,
participants' profiles are real choice data, STOP completes the study."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from campaign.prolific.client import ProlificError
from campaign.prolific.emulator.participant import ParticipantError, add_participant
from tests.prolific.support import Api, adapter_stack, rating_type
from tests.prolific.test_client import CODE, study_fields

pytestmark = pytest.mark.prolific


def _choice(api: Api, filter_id: str, text: str) -> str:
    f = next(f for f in api.client.filters() if f["filter_id"] == filter_id)
    return next(k for k, v in f["choices"].items() if v == text)


def test_max_concurrent_submissions_limits_the_whole_study(api: Api) -> None:
    em = api.need_emulator()
    sid = api.client.create_study(study_fields(total_available_places=3, submissions_config={
        "max_submissions_per_participant": 1, "max_concurrent_submissions": 1}))["id"]
    api.client.transition_study(sid, "PUBLISH")
    first, second = add_participant(em.root_url, em.token), add_participant(em.root_url, em.token)
    sub, _ = first.start(sid)
    assert second.studies() == []  # one person working holds the whole study
    with pytest.raises(ParticipantError):
        second.start(sid)
    first.complete(sub, CODE)
    assert [s["id"] for s in second.studies()] == [sid]


def test_select_filters_take_choice_ids_and_refuse_anything_else(api: Api) -> None:
    api.need_emulator()
    for values in (["GB", "US"], ["United Kingdom"], ["9999"]):
        with pytest.raises(ProlificError) as err:
            api.client.create_study(study_fields(filters=[{"filter_id": "current-country-of-residence",
                                                           "selected_values": values}]))
        assert err.value.status == 400 and values[0] in str(err.value.detail)
    with pytest.raises(ProlificError):
        api.client.create_study(study_fields(filters=[{"filter_id": "fluent-languages", "selected_values": ["English"]}]))
    uk = _choice(api, "current-country-of-residence", "United Kingdom")
    english = _choice(api, "fluent-languages", "English")
    study = api.client.create_study(study_fields(filters=[
        {"filter_id": "current-country-of-residence", "selected_values": [uk]},
        {"filter_id": "fluent-languages", "selected_values": [english]}]))
    assert study["filters"][0]["selected_values"] == [uk]


def test_participants_sign_up_with_choices_the_catalogue_has(api: Api) -> None:
    em = api.need_emulator()
    with pytest.raises(ParticipantError) as err:
        add_participant(em.root_url, em.token, languages=["en"])  # an ISO code is not a choice
    assert err.value.status == 400 and "'en'" in str(err.value.detail)
    with pytest.raises(ParticipantError):
        add_participant(em.root_url, em.token, country="XX")
    uk = _choice(api, "current-country-of-residence", "United Kingdom")
    briton = add_participant(em.root_url, em.token, country="GB", languages=["English"])
    american = add_participant(em.root_url, em.token, country="US", languages=["English"])
    sid = api.client.create_study(study_fields(filters=[{"filter_id": "current-country-of-residence",
                                                         "selected_values": [uk]}]))["id"]
    api.client.transition_study(sid, "PUBLISH")
    assert [s["id"] for s in briton.studies()] == [sid] and american.studies() == []
    assert api.client.eligible_count([{"filter_id": "current-country-of-residence", "selected_values": [uk]}]) == 1


def test_stop_completes_the_study_even_with_submissions_to_review(api: Api) -> None:
    em = api.need_emulator()
    sid = api.client.create_study(study_fields(total_available_places=3))["id"]
    api.client.transition_study(sid, "PUBLISH")
    p = add_participant(em.root_url, em.token)
    sub, _ = p.start(sid)
    p.complete(sub, CODE)
    assert api.client.transition_study(sid, "STOP")["status"] == "COMPLETED"
    api.client.approve(sub)  # still reviewed on the completed study
    assert api.client.study(sid)["status"] == "COMPLETED"
    with pytest.raises(ProlificError):
        api.client.transition_study(sid, "STOP")  # the description has no STOP from COMPLETED
    api.client.update_study(sid, total_available_places=4)  # more places make it active again
    assert api.client.study(sid)["status"] == "ACTIVE"


def test_the_campaigns_study_names_countries_and_languages_by_choice_id(tmp_path: Path) -> None:
    """The adapter looks `countries: [GB, US]` and `languages: [English]` up in `GET /filters/`."""
    from campaign.prolific.study import ProlificConfig

    def configure(url: str, api: object) -> ProlificConfig:
        return ProlificConfig(public_url=url, bundle=1, estimated_minutes=5, reward=Decimal("1.00"),
                              countries=("GB", "US"), languages=("English",))

    with adapter_stack(tmp_path, configure) as st:
        key = rating_type(st.market)
        st.market.refill(key, 2)
        row = st.studies.study(key)
        assert row is not None
        study = st.api.study(row.study_id)
        catalogue = {f["filter_id"]: f.get("choices", {}) for f in st.api.filters()}
        sent = {f["filter_id"]: f.get("selected_values") for f in study["filters"]}
        assert [catalogue["current-country-of-residence"][c] for c in sent["current-country-of-residence"]] == [
            "United Kingdom", "United States"]
        assert [catalogue["fluent-languages"][c] for c in sent["fluent-languages"]] == ["English"]
        assert study["submissions_config"]["max_concurrent_submissions"] == -1


def test_a_country_without_a_choice_is_named_before_any_study_exists(tmp_path: Path) -> None:
    from campaign.marketplaces.base import MarketError
    from campaign.prolific.study import ProlificConfig

    def configure(url: str, api: object) -> ProlificConfig:
        return ProlificConfig(public_url=url, bundle=1, estimated_minutes=5, reward=Decimal("1.00"), countries=("GB", "VA"))

    with adapter_stack(tmp_path, configure) as st:
        key = rating_type(st.market)
        with pytest.raises(MarketError, match="VA has no choice in Prolific's 'current-country-of-residence' filter"):
            st.market.refill(key, 2)
        assert st.api.studies() == []


def test_a_study_prolific_refuses_is_a_final_error_not_a_transient_one(tmp_path: Path) -> None:
    """The adapter's answer to a 400 on study creation is final (the campaign is then blocked by the
    places step) and the study was asked for once."""
    from campaign.marketplaces.base import MarketError, TransientError
    from campaign.prolific.study import ProlificConfig

    def configure(url: str, api: object) -> ProlificConfig:  # 5 minutes at most for a 10-minute estimate
        return ProlificConfig(public_url=url, bundle=1, estimated_minutes=10, maximum_minutes=5, reward=Decimal("1.50"))

    with adapter_stack(tmp_path, configure) as st:
        key = rating_type(st.market)
        with pytest.raises(MarketError, match="maximum_allowed_time") as err:
            st.market.refill(key, 2)
        assert not isinstance(err.value, TransientError)
        assert st.api.studies() == []


def test_legacy_eligibility_requirements_are_echoed_not_enforced(api: Api) -> None:
    """The description targets by `filters` only; the legacy form some clients still send is kept and
    never decides who may take part (the old emulator enforced it)."""
    em = api.need_emulator()
    outsider = add_participant(em.root_url, em.token)
    legacy = [{"_cls": "web.eligibility.models.CustomWhitelistEligibilityRequirement",
               "attributes": [{"name": "white_list", "value": ["0" * 24]}]}]
    study = api.client.create_study(study_fields(eligibility_requirements=legacy))
    assert study["eligibility_requirements"] == legacy and study["filters"] == []
    api.client.transition_study(study["id"], "PUBLISH")
    assert [s["id"] for s in outsider.studies()] == [study["id"]]
