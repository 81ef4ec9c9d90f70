"""The Prolific emulator reads every JSON body under the door rules (`campaign.untrusted`): whatever
the bytes, a 400 in Prolific's error shape or the request, never a 500 or a dropped connection."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from campaign.prolific.emulator.server import start_emulator


@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"name": ' + b"{\"a\": " * 100_000 + b"}", b'{"name": "\\ud800"}',
                                  b'{"n": 1' + b"0" * 5000 + b"}", b'{"reward": Infinity}', b'{"reward": 1e999}',
                                  b"\xff\xfe{}", b'{"name": "x"'])
def test_unreadable_json_is_a_400_in_prolifics_error_shape(tmp_path: Path, body: bytes) -> None:
    with start_emulator(tmp_path / "em") as em:
        req = urllib.request.Request(f"{em.base_url}studies/", data=body, method="POST",
                                     headers={"Authorization": f"Token {em.token}", "Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 400
        assert json.loads(err.value.read())["error"]["status"] == 400


def test_a_number_too_large_for_a_float_is_a_400_not_a_dropped_connection(tmp_path: Path) -> None:
    """`approval_rate: 10**4000` reached float() and raised OverflowError: the emulator closed the connection."""
    with start_emulator(tmp_path / "em") as em:
        body = b'{"approval_rate": 1' + b"0" * 4000 + b"}"
        req = urllib.request.Request(f"{em.root_url}/emulator/participants", data=body, method="POST",
                                     headers={"Authorization": f"Token {em.token}", "Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 400 and json.loads(err.value.read())["error"]["status"] == 400
