"""Server-side check of AWS Signature Version 4, as the requester API's only way in.

boto3 signs every request with the requester's secret; here the same canonical request is rebuilt
from what arrived and signed again with the secret on file for the access key id. Anything that does
not match exactly is refused with the error AWS itself sends, and nothing about the request is acted
on. The time window stops a captured request from being replayed hours later.

Inside that window three more rules hold (see docs/marketplace-security.md):
- `host` and `x-amz-target` must be among the signed headers, so a captured signature cannot be sent
  to another operation or another server;
- the signed Host must be one this server answers to (`Signing.hosts`: its bound address and the
  address in its public URL);
- a signature already used for an operation that changes state (anything but Get*/List*) is refused
  until the window it could be accepted in has passed (`ReplayCache`). boto3 signs a fresh
  invocation id and attempt number into every request, so its retries never look like replays.
"""

from __future__ import annotations

import calendar
import contextvars
import hashlib
import hmac
import json
import re
import socket
import threading
import time
import urllib.parse
import uuid
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Protocol

from campaign.market.protocol import TARGET_PREFIX, ApiError, throttling

ALGORITHM = "AWS4-HMAC-SHA256"
SKEW_SECONDS = 300  # AWS: the signature's time stamp must be within 5 minutes of the server's time
AUTH_RE = re.compile(r"^AWS4-HMAC-SHA256\s+Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})\s*$")
KEY_RE = re.compile(r"^[A-Z0-9]{16,128}$")
REQUIRED_SIGNED = ("host", "x-amz-target")
READ_PREFIXES = ("Get", "List")  # operations that change nothing; every other one is refused when replayed
REPLAY_CAPACITY = 250_000  # signatures remembered at once; beyond it new state changes are throttled
REPLAY_BYTES = 128 * 1024 * 1024  # and at most this much of their stored (compressed) answers
DEFAULT_PORTS = {"http": 80, "https": 443}


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


def replayed() -> ApiError:
    return ApiError(403, {"__type": "InvalidSignatureException", "message": (
        "This request signature is already in use by a request that has not finished; sign every request anew.")})


def replay_cache_full() -> ApiError:
    return throttling()  # the same answer as the fault injector's: boto3 backs off and retries it


def _host_key(value: str, default_port: int | None) -> str | None:
    """`host:port` in lower case, with the scheme's port filled in; None for something that is not a host."""
    value = value.strip().lower().rstrip(".")
    parts = urllib.parse.urlsplit("//" + value)
    try:
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname
    if not host or (parts.username or parts.password or parts.path or parts.query or parts.fragment):
        return None
    host = host.rstrip(".")
    shown = f"[{host}]" if ":" in host else host
    port = port if port is not None else default_port
    return f"{shown}:{port}" if port is not None else shown


LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def hosts_for(urls: Iterable[str]) -> frozenset[str]:
    """The Host values a server reachable at these URLs answers to. An address also answers under the
    loopback names at its port (clients on the same machine use either); a wildcard bind (0.0.0.0, ::)
    also under this machine's own name."""
    out: set[str] = set()
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        if parts.hostname is None:
            continue
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
        names = {parts.hostname.lower()} | LOOPBACK_NAMES
        if parts.hostname in WILDCARDS:
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        for name in names:
            key = _host_key(f"[{name}]:{port}" if ":" in name else f"{name}:{port}", None)
            if key:
                out.add(key)
    return frozenset(out)


class ReplayCache:
    """Signatures of state-changing requests seen inside their validity window, with the answer each got.

    Keyed by the signature itself, each entry lives until its X-Amz-Date stops being accepted. A request
    whose signature is here is not carried out again: while the first is still running the copy waits
    for it; once the first changed something (answered 200) the copy gets that same answer and changes
    nothing; a first that changed nothing (any error, an injected fault or throttle) is forgotten, so
    a client's retry of it runs. Answering the copy rather than refusing it is deliberate: boto3 signs
    neither its invocation id nor its attempt number, so two identical calls within one second are
    byte-for-byte the same signed request, and the second must not fail.

    Memory is bounded by `capacity` entries and `max_bytes` of stored answers: when full of live entries
    a new state-changing request gets ThrottlingException (retried by clients) rather than forgetting a
    signature that could still be replayed.
    """

    WAIT = 30.0  # seconds a copy waits for the first request to finish

    def __init__(self, capacity: int = REPLAY_CAPACITY, max_bytes: int = REPLAY_BYTES) -> None:
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._seen: OrderedDict[bytes, _Entry] = OrderedDict()
        self._bytes = 0
        self._cond = threading.Condition()

    def __len__(self) -> int:
        return len(self._seen)

    def _expire(self, now: float) -> None:
        seen = self._seen
        while seen:  # nearly in time order: drop the expired ones at the front
            entry = next(iter(seen.values()))
            if entry.until > now:  # an entry never settled (its request died) goes when its window ends too
                break
            self._drop(next(iter(seen)))

    def _drop(self, key: bytes) -> None:
        entry = self._seen.pop(key)
        self._bytes -= entry.size

    def first_use(self, signature: str, until: float, now: float) -> None:
        """Marks the signature as in use. Raises `Replayed` (an ApiError carrying the first answer) for a
        copy of a request already carried out, ThrottlingException when the cache is full."""
        key = bytes.fromhex(signature)
        with self._cond:
            self._expire(now)
            deadline = time.monotonic() + self.WAIT
            while True:
                entry = self._seen.get(key)
                if entry is None:
                    break
                if entry.answer is not None:
                    raise Replayed(entry.answer[0], json.loads(zlib.decompress(entry.answer[1])))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise replayed()
                self._cond.wait(left)
            if len(self._seen) >= self.capacity or self._bytes >= self.max_bytes:
                for k in [k for k, e in self._seen.items() if e.until <= now]:
                    self._drop(k)
                if len(self._seen) >= self.capacity or self._bytes >= self.max_bytes:
                    raise replay_cache_full()
            self._seen[key] = _Entry(until)

    def settle(self, signature: str, status: int, body: dict[str, Any]) -> None:
        """The outcome of the request that holds `signature`: kept if it changed something, else forgotten."""
        key = bytes.fromhex(signature)
        with self._cond:
            entry = self._seen.get(key)
            if entry is None or entry.answer is not None:
                return
            if status == 200:
                # bytes, not the objects, and compressed: a CreateHIT answer carries the HIT's question (5 KiB
                # of HTML at the scale bench's 5 items), so a posting burst of 10,000 HITs within the window
                # filled the 64 MiB uncompressed and throttled every state change until it passed
                kept = zlib.compress(json.dumps(body).encode("utf-8"), 1)
                entry.answer = (status, kept)
                entry.size = len(kept) + 200
                self._bytes += entry.size
            else:
                del self._seen[key]
            self._cond.notify_all()


@dataclass
class _Entry:
    until: float
    answer: tuple[int, bytes] | None = None  # status and zlib'd JSON body; None while the first request runs
    size: int = 0


class Replayed(ApiError):
    """A copy of a state-changing request already carried out: answered with the first answer, not run again."""


_reserved: contextvars.ContextVar[str | None] = contextvars.ContextVar("reserved_signature", default=None)


class Signing:
    """What a server checks beyond the signature itself: the Host names it answers to, and the
    signatures of state-changing calls it has already acted on."""

    def __init__(self, hosts: Iterable[str], replay: ReplayCache | None = None) -> None:
        self.hosts = frozenset(hosts)
        self.replay = replay if replay is not None else ReplayCache()
        self._verdicts: dict[str, bool] = {}  # Host value -> answers_to; clients send a handful of values

    def answers_to(self, host: str) -> bool:
        """Whether a Host header's value names this server (a value without a port means the scheme's)."""
        verdict = self._verdicts.get(host)
        if verdict is None:
            keys = {_host_key(host, None)} | {_host_key(host, port) for port in DEFAULT_PORTS.values()}
            verdict = bool(self.hosts & {k for k in keys if k})
            if len(self._verdicts) < 256:  # bounded: a client making up Host values gets no memory of them
                self._verdicts[host] = verdict
        return verdict

    def settle(self, status: int, body: dict[str, Any]) -> None:
        """Called with every requester API answer, in the request's own thread (or task): a state-changing
        request that `verify` let through keeps its answer for copies of it (see `ReplayCache`), or is
        forgotten when it changed nothing. Only the request that reserved a signature settles it."""
        signature = _reserved.get()
        if signature is not None:
            _reserved.set(None)
            self.replay.settle(signature, status, body)

    @classmethod
    def for_urls(cls, *urls: str | None) -> Signing:
        return cls(hosts_for(u for u in urls if u))


def changes_state(target: str) -> bool:
    """Whether an X-Amz-Target names an operation that may change something (not Get*/List*)."""
    op = target[len(TARGET_PREFIX):] if target.startswith(TARGET_PREFIX) else target
    return not op.startswith(READ_PREFIXES)


def verify(method: str, path: str, query: str, headers: Headers, body: bytes,
           lookup: Callable[[str], tuple[str, str] | None], now: float, signing: Signing | None = None) -> str:
    """The account whose key signed this request; raises the AWS error (an ApiError) otherwise.

    With `signing` (every server passes it) the Host must be one of `signing.hosts` and a state-changing
    request's signature is spent: sent again inside its window it is refused."""
    _reserved.set(None)
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
    # A request without X-Amz-Target names no operation (UnknownOperationException follows); one with it
    # must have signed it, or the signature could be carried over to any other operation.
    required = set(REQUIRED_SIGNED) if headers.get("X-Amz-Target") is not None else {"host"}
    if signed != sorted(signed) or not ({"x-amz-date", "date"} & set(signed)) or not required <= set(signed):
        raise invalid_signature("SignedHeaders must be sorted and include host, x-amz-date and x-amz-target.")
    host_values = headers.get_all("Host") or []
    if len(host_values) != 1 or (signing is not None and not signing.answers_to(str(host_values[0]))):
        raise invalid_signature("The Host header does not name this server; sign requests for the address you send them to.")
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
    if signing is not None and changes_state(str(headers.get("X-Amz-Target") or "")):
        signing.replay.first_use(signature, when + SKEW_SECONDS + 1, now)
        _reserved.set(signature)
    return account


def sign_headers(url: str, body: bytes, headers: dict[str, str], access_key_id: str, secret_access_key: str,
                 region: str = "us-east-1", service: str = "mturk-requester") -> dict[str, str]:
    """Client side, for hand-made requests (tests, tools): the headers botocore's own signer adds."""
    from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
    from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
    from botocore.credentials import Credentials as BotoCredentials  # type: ignore[import-untyped]

    headers = dict(headers)
    if not any(k.lower() == "amz-sdk-invocation-id" for k in headers):  # as boto3 does: no two requests sign alike
        headers["amz-sdk-invocation-id"] = str(uuid.uuid4())
    req = AWSRequest(method="POST", url=url, data=body, headers=headers)
    SigV4Auth(BotoCredentials(access_key_id, secret_access_key), service, region).add_auth(req)
    return dict(req.headers.items())
