"""Server-side check of AWS Signature Version 4, as the requester API's only way in.

boto3 signs every request with the requester's secret; here the same canonical request is rebuilt
from what arrived and signed again with the secret on file for the access key id. Anything that does
not match exactly is refused with the error AWS itself sends, and nothing about the request is acted
on. The time window stops a captured request from being replayed hours later.
"""

from __future__ import annotations

import calendar
import hashlib
import hmac
import re
import urllib.parse
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Protocol

from campaign.market.protocol import ApiError

ALGORITHM = "AWS4-HMAC-SHA256"
SKEW_SECONDS = 300  # AWS: the signature's time stamp must be within 5 minutes of the server's time
AUTH_RE = re.compile(r"^AWS4-HMAC-SHA256\s+Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})\s*$")
KEY_RE = re.compile(r"^[A-Z0-9]{16,128}$")


class Headers(Protocol):
    def get_all(self, name: str, failobj: Any = ...) -> list[str] | Any: ...
    def get(self, name: str, failobj: Any = ...) -> Any: ...


def missing_token() -> ApiError:
    return ApiError(403, {"__type": "MissingAuthenticationToken", "message": "Missing Authentication Token"})


def unrecognized_client() -> ApiError:
    return ApiError(403, {"__type": "UnrecognizedClientException", "message": "The security token included in the request is invalid."})


def invalid_signature(message: str | None = None) -> ApiError:
    return ApiError(403, {"__type": "InvalidSignatureException", "message": message or (
        "The request signature we calculated does not match the signature you provided. Check your AWS Secret "
        "Access Key and signing method. Consult the service documentation for details.")})


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


@lru_cache(maxsize=1024)
def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """Four HMACs that change once a day per key: derived once and kept (AWS's own advice for signers)."""
    k = _hmac(("AWS4" + secret).encode("utf-8"), date)
    k = _hmac(k, region)
    k = _hmac(k, service)
    return _hmac(k, "aws4_request")


def canonical_request(method: str, path: str, query: str, headers: Headers, signed: list[str], body: bytes) -> str:
    uri = urllib.parse.quote(urllib.parse.unquote(path or "/"), safe="/~")
    pairs = sorted(urllib.parse.parse_qsl(query, keep_blank_values=True))
    cq = "&".join(f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}" for k, v in pairs)
    lines = []
    for name in signed:
        values = headers.get_all(name) or []
        lines.append(f"{name}:{','.join(' '.join(str(v).split()) for v in values)}")
    return "\n".join([method, uri, cq, "\n".join(lines) + "\n", ";".join(signed), hashlib.sha256(body).hexdigest()])


STAMP_RE = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$")


def _amz_time(stamp: str) -> float | None:
    m = STAMP_RE.match(stamp)
    if m is None:
        return None
    y, mo, d, h, mi, s = (int(x) for x in m.groups())
    try:
        return calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) if datetime(y, mo, d, h, mi, s) else None
    except ValueError:
        return None


def verify(method: str, path: str, query: str, headers: Headers, body: bytes,
           lookup: Callable[[str], tuple[str, str] | None], now: float) -> str:
    """The account whose key signed this request; raises the AWS error (an ApiError) otherwise."""
    auth = headers.get("Authorization")
    if not auth:
        raise missing_token()
    m = AUTH_RE.match(auth.strip())
    if m is None:
        raise invalid_signature("Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' "
                                "parameters with the AWS4-HMAC-SHA256 algorithm.")
    credential, signed_raw, signature = m.groups()
    scope = credential.split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        raise invalid_signature("Credential should be scoped to a valid region, service and 'aws4_request'.")
    key_id, date, region, service = scope[:4]
    found = lookup(key_id) if KEY_RE.match(key_id) else None
    if found is None:
        raise unrecognized_client()
    secret, account = found
    signed = signed_raw.split(";")
    if signed != sorted(signed) or "host" not in signed or not ({"x-amz-date", "date"} & set(signed)):
        raise invalid_signature("SignedHeaders must be sorted and include host and x-amz-date.")
    stamp = headers.get("X-Amz-Date") or ""
    when = _amz_time(stamp)
    if when is None:
        raise invalid_signature("X-Amz-Date is missing or not in the form YYYYMMDDTHHMMSSZ.")
    if stamp[:8] != date:
        raise invalid_signature("Credential date does not match the date of X-Amz-Date.")
    if abs(now - when) > SKEW_SECONDS:
        server = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
        raise invalid_signature(f"Signature expired: {stamp} is now earlier than {server} "
                                f"(outside the {SKEW_SECONDS // 60}-minute window).")
    creq = canonical_request(method, path, query, headers, signed, body)
    to_sign = "\n".join([ALGORITHM, stamp, "/".join(scope[1:]), hashlib.sha256(creq.encode("utf-8")).hexdigest()])
    expected = hmac.new(signing_key(secret, date, region, service), to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature):
        raise invalid_signature()
    return account


def sign_headers(url: str, body: bytes, headers: dict[str, str], access_key_id: str, secret_access_key: str,
                 region: str = "us-east-1", service: str = "mturk-requester") -> dict[str, str]:
    """Client side, for hand-made requests (tests, tools): the headers botocore's own signer adds."""
    from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
    from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
    from botocore.credentials import Credentials as BotoCredentials  # type: ignore[import-untyped]

    req = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
    SigV4Auth(BotoCredentials(access_key_id, secret_access_key), service, region).add_auth(req)
    return dict(req.headers.items())
