"""The Requester API spoken directly to the built-in marketplace: JSON 1.1 bodies, signed with AWS
Signature Version 4, over a kept-alive connection (or, on virtual time, handed to the application in this
process: `campaign.web.loopback`).

Why not boto3 here, as for MTurk: a py-spy profile of a daemon at 470,000 propositions found boto3 and
botocore in 32% of its samples (event hooks 8%, urllib3 and http.client 12%, signing 6%, parsing and
validation 4%) for 190 small requests a second, most of them ApproveAssignment, which the API has no
batch form of. This client does what those requests need and no more, for the one server whose every
answer this project writes. It keeps boto3's contract where `MTurkMarketplace` reads it: the same
methods (`call`, `paginate` at 100 a page), errors raised as botocore's `ClientError` (code, message,
TurkErrorCode) and `BotoCoreError` (connection trouble), the same retries (botocore's "standard" mode:
throttling, 5xx and broken connections, exponential backoff with jitter capped at 20 s, `max_attempts`
in all) and a fresh nonce signed into every attempt (`campaign.marketplaces.mturk_client._sign_a_nonce`).
Timestamps in answers stay epoch seconds, which `MTurkMarketplace` reads as it reads datetimes. A
listing stops at its first page short of 100 (the built-in marketplace's pages are full but for the
last), where boto3's paginator asks once more for the empty page MTurk's last token leads to.
tests/marketplaces/test_signed_json.py runs each operation the daemon uses through this client and
boto3 side by side.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import random
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore import xform_name  # type: ignore[import-untyped]
from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError, ReadTimeoutError  # type: ignore[import-untyped]

from campaign.credentials import Credentials, read_credentials_file
from campaign.market.auth import ALGORITHM, signing_key
from campaign.market.protocol import CONTENT_TYPE, TARGET_PREFIX
from campaign.marketplaces.mturk_client import NONCE_HEADER, RateLimiter

REGION, SERVICE = "us-east-1", "mturk-requester"
PAGE_SIZE = 100
MAX_BACKOFF = 20.0  # seconds, botocore's standard mode

# The API's operations (2017-01-17), by the name boto3 gives each method
OPERATIONS: dict[str, str] = {xform_name(name): name for name in (
    "AcceptQualificationRequest", "ApproveAssignment", "AssociateQualificationWithWorker",
    "CreateAdditionalAssignmentsForHIT", "CreateHIT", "CreateHITType", "CreateHITWithHITType",
    "CreateQualificationType", "CreateWorkerBlock", "DeleteHIT", "DeleteQualificationType", "DeleteWorkerBlock",
    "DisassociateQualificationFromWorker", "GetAccountBalance", "GetAssignment", "GetFileUploadURL", "GetHIT",
    "GetQualificationScore", "GetQualificationType", "ListAssignmentsForHIT", "ListBonusPayments", "ListHITs",
    "ListHITsForQualificationType", "ListQualificationRequests", "ListQualificationTypes",
    "ListReviewPolicyResultsForHIT", "ListReviewableHITs", "ListWorkerBlocks", "ListWorkersWithQualificationType",
    "NotifyWorkers", "RejectAssignment", "RejectQualificationRequest", "SendBonus", "SendTestEventNotification",
    "UpdateExpirationForHIT", "UpdateHITReviewStatus", "UpdateHITTypeOfHIT", "UpdateNotificationSettings",
    "UpdateQualificationType")}

# What botocore's standard retry mode tries again (besides broken connections)
THROTTLING_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException", "TooManyRequestsException",
    "ProvisionedThroughputExceededException", "TransactionInProgressException", "RequestLimitExceeded",
    "BandwidthLimitExceeded", "LimitExceededException", "RequestThrottled", "SlowDown", "PriorRequestNotComplete",
    "EC2ThrottledException"})
TRANSIENT_CODES = frozenset({"RequestTimeout", "RequestTimeoutException", "PriorRequestNotComplete"})
TRANSIENT_STATUS = frozenset({500, 502, 503, 504})

# (method, target, headers, body) -> (status, body): one request and its answer
Send = Callable[[str, str, list[tuple[str, str]], bytes], tuple[int, bytes]]


def _default(value: Any) -> Any:
    """JSON for a datetime (UpdateExpirationForHIT's ExpireAt): epoch seconds, the JSON protocol's
    timestamps. Anything else JSON has no form for is refused (money goes as text, never a float)."""
    if isinstance(value, datetime):
        stamp = (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
        return int(stamp) if stamp == int(stamp) else stamp
    raise TypeError(f"{type(value).__name__} is not a value the Requester API takes")


class Signer:
    """SigV4 for POST / with a JSON body: the signed headers are content-type, host, x-amz-date,
    x-amz-target and the nonce, which is what the built-in marketplace requires (host and target
    signed, so a captured signature cannot be sent elsewhere or for another operation)."""

    def __init__(self, credentials: Credentials, host: str) -> None:
        self._key_id = credentials.access_key_id
        self._secret = credentials.secret_access_key
        self.host = host

    def __repr__(self) -> str:  # never the secret
        return f"Signer(key={self._key_id[:4]}..., host={self.host!r})"

    @property
    def key_id(self) -> str:
        """The access key id requests are signed with (the secret is never shown)."""
        return self._key_id

    def headers(self, target: str, body: bytes, now: float | None = None) -> list[tuple[str, str]]:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
        day = stamp[:8]
        nonce = uuid.uuid4().hex
        signed = [("content-type", CONTENT_TYPE), ("host", self.host), ("x-amz-date", stamp),
                  ("x-amz-target", target), (NONCE_HEADER, nonce)]
        names = ";".join(name for name, _ in signed)
        canonical = "\n".join(["POST", "/", "", "".join(f"{n}:{v}\n" for n, v in signed), names,
                               hashlib.sha256(body).hexdigest()])
        scope = f"{day}/{REGION}/{SERVICE}/aws4_request"
        to_sign = f"{ALGORITHM}\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode('utf-8')).hexdigest()}"
        key = signing_key(self._secret, day, REGION, SERVICE)  # derived once a day and kept (lru_cache)
        signature = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
        auth = f"{ALGORITHM} Credential={self._key_id}/{scope}, SignedHeaders={names}, Signature={signature}"
        return [("Content-Type", CONTENT_TYPE), ("Host", self.host), ("X-Amz-Date", stamp), ("X-Amz-Target", target),
                (NONCE_HEADER, nonce), ("Authorization", auth)]


class Connections:
    """Kept-alive HTTP(S) connections to one endpoint, one per caller at a time (the daemon's passes run
    on several threads). A connection that breaks is dropped, never reused."""

    def __init__(self, endpoint_url: str, timeout: float) -> None:
        parts = urllib.parse.urlsplit(endpoint_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"endpoint_url must be an http(s) address, got {endpoint_url!r}")
        self.https = parts.scheme == "https"
        self.hostname = parts.hostname
        default = 443 if self.https else 80
        self.port = parts.port or default
        self.timeout = timeout
        shown = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        self.host_header = shown if self.port == default else f"{shown}:{self.port}"  # as botocore signs it
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _new(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return cls(self.hostname, self.port, timeout=self.timeout)

    def send(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> tuple[int, bytes]:
        """One request; a kept connection the server closed meanwhile is retried once on a new one (the
        request never reached the application then). Raises OSError/HTTPException on trouble."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        fresh = conn is None
        while True:
            if conn is None:
                conn = self._new()
            try:
                conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
                for name, value in headers:
                    conn.putheader(name, value)
                conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body)
                resp = conn.getresponse()
                data = resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()
                if fresh:
                    raise
                conn, fresh = None, True  # a kept connection gone stale: once more on a new one
                continue
            except BaseException:
                conn.close()
                raise
            if resp.will_close:
                conn.close()
            else:
                with self._lock:
                    self._idle.append(conn)
            return resp.status, data

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class SignedJsonClient:
    """A `MarketClient` for the built-in marketplace without boto3 (see the module's docstring)."""

    def __init__(self, endpoint_url: str, credentials: Credentials, *, marketplace: str = "local",
                 max_rps: float = 0.0, max_attempts: int = 10, timeout: float = 60.0) -> None:
        self.marketplace = marketplace
        self.endpoint_url: str | None = endpoint_url
        self.limiter = RateLimiter(max_rps)
        self.max_attempts = max(1, int(max_attempts))
        self.connections = Connections(endpoint_url, timeout)
        self.signer = Signer(credentials, self.connections.host_header)
        self.send: Send = self.connections.send
        self.sleep: Callable[[float], None] = time.sleep
        self.attempts = 0  # requests sent, retries included

    def __repr__(self) -> str:  # never show credentials
        return f"SignedJsonClient(marketplace={self.marketplace!r}, endpoint_url={self.endpoint_url!r})"

    def hand_to(self, send: Send) -> None:
        """Send every request through `send` instead of a socket (`campaign.web.loopback`)."""
        self.send = send

    def call(self, op: str, **params: Any) -> dict[str, Any]:
        """`op` is the boto3 method name, e.g. "create_hit_with_hit_type"."""
        self.limiter.acquire()
        return self._request(op, params)

    def paginate(self, op: str, result_key: str, **params: Any) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            self.limiter.acquire()
            page = self._request(op, {**params, "MaxResults": PAGE_SIZE, **({"NextToken": token} if token else {})})
            items = page.get(result_key, [])
            yield from items
            token = page.get("NextToken")
            # MTurk puts a token on the last page too, which leads to an empty one; the built-in marketplace
            # fills every page but the last (`campaign.market.engine.base.EngineBase._page`), so a short page
            # ends the listing here: one request instead of two for most HITs' assignments
            if not token or len(items) < PAGE_SIZE:
                return

    def _request(self, op: str, params: dict[str, Any]) -> dict[str, Any]:
        name = OPERATIONS.get(op)
        if name is None:
            raise ValueError(f"{op!r} is not an operation of the Requester API")
        body = json.dumps(params, default=_default, separators=(",", ":")).encode("utf-8")
        target = TARGET_PREFIX + name
        attempt = 0
        while True:
            attempt += 1
            self.attempts += 1
            try:
                status, data = self.send("POST", "/", self.signer.headers(target, body), body)
            except TimeoutError as exc:
                error: Exception = ReadTimeoutError(endpoint_url=self.endpoint_url, error=exc)
                status, data = 0, b""
            except (OSError, http.client.HTTPException) as exc:
                error = (EndpointConnectionError(endpoint_url=self.endpoint_url, error=exc)
                         if isinstance(exc, ConnectionRefusedError) else
                         ConnectionClosedError(endpoint_url=self.endpoint_url, error=exc))
                status, data = 0, b""
            else:
                if status < 300:
                    return _json(data)
                error = _client_error(status, data, name)
            if attempt >= self.max_attempts or not _retryable(status, error):
                raise error
            self.sleep(random.random() * min(MAX_BACKOFF, 2.0 ** (attempt - 1)))

    def close(self) -> None:
        self.connections.close()


def _json(data: bytes) -> dict[str, Any]:
    if not data:
        return {}
    try:
        got = json.loads(data)
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def _client_error(status: int, data: bytes, operation: str) -> ClientError:
    """botocore's reading of a JSON-protocol error: the code is `__type` after any '#', the message
    `message` or `Message`; the error's other members (TurkErrorCode) also at the top, as modelled
    errors give them."""
    body = _json(data)
    code = str(body.get("__type") or body.get("code") or body.get("Code") or "").rpartition("#")[2]
    if not code:
        code = str(status)
    message = str(body.get("message") or body.get("Message") or "")
    response: dict[str, Any] = {"Error": {"Code": code, "Message": message},
                                "ResponseMetadata": {"HTTPStatusCode": status}}
    for key, value in body.items():
        if key not in ("__type", "message", "Message", "code", "Code"):
            response[key] = value
            response["Error"][key] = value
    if "Message" in body:
        response["Message"] = body["Message"]
    return ClientError(response, operation)


def _retryable(status: int, error: Exception) -> bool:
    if not isinstance(error, ClientError):
        return True  # the connection broke or timed out
    code = error.response.get("Error", {}).get("Code", "")
    return status in TRANSIENT_STATUS or code in THROTTLING_CODES or code in TRANSIENT_CODES


def open_signed_json(endpoint_url: str | None, *, credentials: Credentials | None = None,
                     credentials_file: Path | None = None, profile: str = "default", max_rps: float = 0.0,
                     max_attempts: int = 10, **_boto_only: Any) -> SignedJsonClient:
    """The client for the built-in marketplace at `endpoint_url`, with the requester credentials as
    `make_client` finds them: given, from a credentials file's profile, or boto3's standard chain
    (AWS_SHARED_CREDENTIALS_FILE=STATE/credentials for a separately run marketplace). Options that only
    mean something to boto3 (`retry_mode`) are accepted and left alone."""
    if not endpoint_url:
        raise ValueError("marketplace 'local' needs endpoint_url (the built-in marketplace's address)")
    if credentials is None and credentials_file is not None:
        credentials = read_credentials_file(credentials_file, profile)
    if credentials is None:
        import boto3  # type: ignore[import-untyped]

        found = boto3.session.Session().get_credentials()
        if found is None:
            raise ValueError("marketplace 'local' needs the marketplace's requester credentials (credentials= or "
                             "credentials_file=, e.g. STATE/credentials written by 'campaign market serve')")
        frozen = found.get_frozen_credentials()
        credentials = Credentials(frozen.access_key, frozen.secret_key)
    return SignedJsonClient(endpoint_url, credentials, max_rps=max_rps, max_attempts=max_attempts)
