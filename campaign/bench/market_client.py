"""A light requester client for `campaign bench market --client sigv4`: MTurk's JSON protocol over
kept-alive HTTP connections, every request signed with AWS Signature Version 4.

The bench measures the marketplace server. boto3 spends 1.3-2 ms of its own CPU per call (event
hooks, user-agent assembly, parameter validation, response parsing into datetimes), more than the
server spends answering; on a 2-core machine the clients then take most of the CPU the server needs.
This client sends what boto3 sends (the same target header, JSON body and signature scheme, so the
server runs exactly the same authentication, validation and engine path) for a fraction of the CPU.
It signs and sends as the daemon's own client for the built-in marketplace does
(`campaign.marketplaces.signed_json`), without its retries and boto3-shaped errors: a bench counts
what fails, and walks listings to the empty page as boto3's paginator does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from campaign.credentials import Credentials
from campaign.market.protocol import TARGET_PREFIX
from campaign.marketplaces.signed_json import Connections, Signer


class RequestFailed(Exception):
    """A non-200 answer: `code` is the error's `__type` as boto3 would report it."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class SignedClient:
    def __init__(self, endpoint_url: str, credentials: Credentials, timeout: float = 60.0) -> None:
        self._connections = Connections(endpoint_url, timeout)
        self._signer = Signer(credentials, self._connections.host_header)

    def __repr__(self) -> str:  # never show credentials
        return f"SignedClient({self._connections.host_header!r})"

    def call(self, op: str, **params: Any) -> dict[str, Any]:
        """`op` is the API's operation name, e.g. "CreateHITWithHITType"."""
        body = json.dumps(params).encode("utf-8")
        status, data = self._connections.send("POST", "/", self._signer.headers(TARGET_PREFIX + op, body), body)
        out = json.loads(data.decode("utf-8")) if data else {}
        if status != 200:
            raise RequestFailed(status, str(out.get("__type", "")), str(out.get("Message") or out.get("message") or ""))
        return out

    def pages(self, op: str, page_size: int = 100, **params: Any) -> Iterator[dict[str, Any]]:
        """Every page, as botocore's paginator walks them: follow NextToken until a page comes without one."""
        token: str | None = None
        while True:
            page = self.call(op, **params, MaxResults=page_size, **({"NextToken": token} if token else {}))
            yield page
            token = page.get("NextToken")
            if not token:
                return
