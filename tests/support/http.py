"""A JSON call over HTTP as the participant's browser or a researcher's script makes it, for tests that
talk to the Prolific door or the emulator without a client class in between."""

from __future__ import annotations

import json
import urllib.request
from typing import Any


def call_json(url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """POST `body` as JSON (GET when there is none) and return the decoded answer; HTTP errors raise."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET",
                                 headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return dict(json.loads(resp.read()))
