"""A light requester client for `campaign bench market --client sigv4`: MTurk's JSON protocol over one
keep-alive HTTP connection per thread, every request signed with AWS Signature Version 4.

The bench measures the marketplace server. boto3 spends 1.3-2 ms of its own CPU per call (event
hooks, user-agent assembly, parameter validation, response parsing into datetimes), more than the
server spends answering; on a 2-core machine the clients then take most of the CPU the server needs.
This client sends what boto3 sends (the same target header, JSON body and signature scheme, so the
server runs exactly the same authentication, validation and engine path) for a tenth of the CPU.
The daemon itself always uses boto3 (`campaign.marketplaces.mturk_client`); so does the bench by default.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from typing import Any

from campaign.credentials import Credentials
from campaign.market.auth import ALGORITHM, signing_key
from campaign.market.protocol import CONTENT_TYPE, TARGET_PREFIX

REGION = "us-east-1"
SERVICE = "mturk-requester"
SIGNED_HEADERS = "amz-sdk-invocation-id;content-type;host;x-amz-date;x-amz-target"


class RequestFailed(Exception):
    """A non-200 answer: `code` is the error's `__type` as boto3 would report it."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class SignedClient:
    def __init__(self, endpoint_url: str, credentials: Credentials, timeout: float = 60.0) -> None:
        parts = urllib.parse.urlsplit(endpoint_url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._netloc = parts.netloc
        self._key_id = credentials.access_key_id
        self._secret = credentials.secret_access_key
        self._timeout = timeout
        self._local = threading.local()

    def __repr__(self) -> str:  # never show credentials
        return f"SignedClient({self._netloc!r})"

    def _headers(self, op: str, body: bytes) -> dict[str, str]:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        date = stamp[:8]
        target = TARGET_PREFIX + op
        invocation = uuid.uuid4().hex  # as boto3 does: two identical calls in one second still sign differently
        canonical = "\n".join(["POST", "/", "",
                               f"amz-sdk-invocation-id:{invocation}\ncontent-type:{CONTENT_TYPE}\nhost:{self._netloc}\nx-amz-date:{stamp}\nx-amz-target:{target}\n",
                               SIGNED_HEADERS, hashlib.sha256(body).hexdigest()])
        scope = f"{date}/{REGION}/{SERVICE}/aws4_request"
        to_sign = "\n".join([ALGORITHM, stamp, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest()])
        signature = hmac.new(signing_key(self._secret, date, REGION, SERVICE), to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
        return {"amz-sdk-invocation-id": invocation, "Content-Type": CONTENT_TYPE, "Host": self._netloc, "X-Amz-Date": stamp, "X-Amz-Target": target,
                "Authorization": f"{ALGORITHM} Credential={self._key_id}/{scope}, SignedHeaders={SIGNED_HEADERS}, "
                                 f"Signature={signature}"}

    def call(self, op: str, **params: Any) -> dict[str, Any]:
        """`op` is the API's operation name, e.g. "CreateHITWithHITType"."""
        body = json.dumps(params).encode("utf-8")
        for attempt in (0, 1):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
            try:
                conn.request("POST", "/", body=body, headers=self._headers(op, body))
                resp = conn.getresponse()
                data = resp.read()
                break
            except (http.client.HTTPException, ConnectionError):
                conn.close()
                self._local.conn = None
                if attempt:  # a stale keep-alive connection is retried once on a fresh one
                    raise
        out = json.loads(data.decode("utf-8")) if data else {}
        if resp.status != 200:
            raise RequestFailed(resp.status, str(out.get("__type", "")), str(out.get("Message") or out.get("message") or ""))
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
