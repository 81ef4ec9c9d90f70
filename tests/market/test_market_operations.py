"""Every operation botocore knows for MTurk is either implemented or named in docs/marketplace.md's "What differs" list.

The list is read from that page itself, so it can never fall behind the code: an operation implemented
later fails this test until the page stops calling it missing, and a new botocore operation fails it until
it is implemented or listed.
"""

from __future__ import annotations

import re

import pytest
from botocore import xform_name
from botocore.exceptions import ClientError

from campaign.market.engine import Engine
from campaign.market.protocol import operation_names
from tests.support.paths import ROOT

PAGE = ROOT / "docs" / "marketplace.md"


def _what_differs() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("What differs:\n")
    end = text.find("\n## ", start)
    return text[start:] if end < 0 else text[start:end]


def _listed_as_missing() -> set[str]:
    bullet = next(b for b in re.split(r"\n- ", _what_differs()) if b.startswith("Operations not implemented"))
    return set(re.findall(r"`([A-Z][A-Za-z]+)`", bullet)) & operation_names()


def _implemented() -> set[str]:
    return {op for op in operation_names() if callable(getattr(Engine, f"op_{op}", None))}


def test_every_botocore_operation_is_implemented_or_listed():
    missing = operation_names() - _implemented()
    listed = _listed_as_missing()
    assert missing == listed, (f"implemented but docs/marketplace.md calls them missing: {sorted(listed - missing)}; "
                               f"missing but not in docs/marketplace.md: {sorted(missing - listed)}")
    section = _what_differs()
    for op in missing:
        assert f"`{op}`" in section
    assert len(operation_names()) == 39 and len(_implemented()) == 39 - len(missing)


def test_no_engine_operation_that_botocore_does_not_know():
    ops = {name[3:] for name in dir(Engine) if name.startswith("op_")}
    assert ops <= operation_names()


@pytest.mark.parametrize("op", sorted(operation_names() - _implemented()))
def test_unimplemented_operations_refuse_as_documented(market, op):
    """Called through boto3 with the smallest valid input, each answers the documented RequestError."""
    minimal = {
        "GetFileUploadURL": {"AssignmentId": "3PR3LXCWSFNV4OJWZBHIMQOIJVSX9G", "QuestionIdentifier": "q"},
        "ListReviewPolicyResultsForHIT": {"HITId": "3PR3LXCWSFNV4OJWZBHIMQOIJVSX9G"},
        "SendTestEventNotification": {"Notification": {"Destination": "x@example.org", "Transport": "Email",
                                                       "Version": "2006-05-05", "EventTypes": ["Ping"]},
                                      "TestEventType": "Ping"},
        "UpdateNotificationSettings": {"HITTypeId": "3PR3LXCWSFNV4OJWZBHIMQOIJVSX9G", "Active": False},
    }
    with pytest.raises(ClientError) as ei:
        getattr(market.client.raw, xform_name(op))(**minimal[op])
    r = ei.value.response
    assert r["Error"]["Code"] == "RequestError" and r["TurkErrorCode"] == "AWS.MechanicalTurk.InvalidParameterValue"
    assert f"The operation {op} is not supported by this marketplace." in r["Error"]["Message"]
