from campaign.quality.qualifications import requirements
from campaign.spec import Qualifications


def test_locale_rate_count_and_masters():
    q = Qualifications(locales=("US", "GB", "US-NY"), approval_rate=98, approved_hits=500, masters=True)
    reqs = requirements(q, sandbox=True)
    by_id = {r["QualificationTypeId"]: r for r in reqs}
    assert by_id["00000000000000000071"]["Comparator"] == "In"
    assert by_id["00000000000000000071"]["LocaleValues"][2] == {"Country": "US", "Subdivision": "NY"}
    assert by_id["000000000000000000L0"]["IntegerValues"] == [98]
    assert by_id["00000000000000000040"]["IntegerValues"] == [500]
    assert "2ARFPLSP75KLA8M8DH1HTEQVJT3SY6" in by_id and "2F1QJWKUDD8XADTFD2Q0G6UTO95ALH" not in by_id
    prod = {r["QualificationTypeId"] for r in requirements(q, sandbox=False)}
    assert "2F1QJWKUDD8XADTFD2Q0G6UTO95ALH" in prod
    assert all(r["ActionsGuarded"] == "DiscoverPreviewAndAccept" for r in reqs)


def test_single_locale_uses_equal_to_and_custom_types_need_an_id():
    q = Qualifications(locales=("US",), approval_rate=None, custom=(("trained", "GreaterThanOrEqualTo", 80),))
    reqs = requirements(q, sandbox=True)
    assert reqs == [{"QualificationTypeId": "00000000000000000071", "Comparator": "EqualTo",
                     "LocaleValues": [{"Country": "US"}], "ActionsGuarded": "DiscoverPreviewAndAccept"}]
    reqs = requirements(q, sandbox=True, custom_ids={"trained": "3ABC"})
    assert reqs[-1] == {"QualificationTypeId": "3ABC", "Comparator": "GreaterThanOrEqualTo", "IntegerValues": [80],
                        "ActionsGuarded": "DiscoverPreviewAndAccept"}
