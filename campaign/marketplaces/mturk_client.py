"""The campaign's way to talk to an MTurk-API marketplace (the built-in one, the sandbox, MTurk): a boto3 `mturk`
client with retries, a client-side rate limit and paginators at 100 per page.

The built-in marketplace, the MTurk sandbox and production differ only in endpoint and credentials here;
production must be asked for explicitly, because a mistake there spends real money. For the built-in
marketplace (`local`) the credentials are given explicitly (the key pair `start_market` returns, or a
profile of the credentials file `campaign market serve` writes): AWS credentials in the environment
belong to real MTurk and are never sent to it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from campaign.credentials import Credentials, read_credentials_file

SANDBOX_ENDPOINT = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
PRODUCTION_ENDPOINT = "https://mturk-requester.us-east-1.amazonaws.com"
MARKETPLACES = ("local", "mturk-sandbox", "mturk")


class ProductionNotAllowed(RuntimeError):
    """Refusing to talk to real MTurk without an explicit go-ahead."""


class RateLimiter:
    """Token bucket on the caller's side: stays under the service's (unpublished) velocity limit."""

    def __init__(self, rate: float, burst: float | None = None) -> None:
        self.rate = float(rate)
        self.burst = float(burst if burst is not None else max(1.0, rate))
        self._tokens = self.burst
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def acquire(self) -> None:
        if self.rate <= 0:
            return
        while True:
            with self._lock:
                t = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (t - self._last) * self.rate)
                self._last = t
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                wait = (1 - self._tokens) / self.rate
            time.sleep(wait)


class RequesterClient(Protocol):
    """What `MTurkMarketplace` needs of a client: boto3's (`MarketClient`) or the built-in marketplace's
    own (`campaign.marketplaces.signed_json.SignedJsonClient`). Errors are botocore's."""

    marketplace: str
    endpoint_url: str | None

    def call(self, op: str, **params: Any) -> dict[str, Any]: ...

    def paginate(self, op: str, result_key: str, **params: Any) -> Iterator[dict[str, Any]]: ...


class MarketClient:
    def __init__(self, raw: Any, marketplace: str, endpoint_url: str | None, max_rps: float) -> None:
        self.raw = raw
        self.marketplace = marketplace
        self.endpoint_url = endpoint_url
        self.limiter = RateLimiter(max_rps)

    @property
    def exceptions(self) -> Any:
        return self.raw.exceptions

    def __repr__(self) -> str:  # never show credentials
        return f"MarketClient(marketplace={self.marketplace!r}, endpoint_url={self.endpoint_url!r})"

    def call(self, op: str, **params: Any) -> dict[str, Any]:
        """`op` is the boto3 method name, e.g. "create_hit_with_hit_type"."""
        self.limiter.acquire()
        return getattr(self.raw, op)(**params)

    def paginate(self, op: str, result_key: str, **params: Any) -> Iterator[dict[str, Any]]:
        paginator = self.raw.get_paginator(op)
        pages = iter(paginator.paginate(PaginationConfig={"PageSize": 100}, **params))
        while True:
            self.limiter.acquire()
            try:
                page = next(pages)
            except StopIteration:
                return
            yield from page.get(result_key, [])


NONCE_HEADER = "x-campaign-nonce"


def _sign_a_nonce(request: Any, **_: Any) -> None:
    """Adds a fresh value to every attempt before it is signed. boto3 signs neither its invocation id nor
    its attempt number, so two identical calls within one second would carry the same signature, and the
    built-in marketplace answers a repeated state-changing signature with the first call's answer instead
    of doing it again (its replay guard, `campaign.market.auth.ReplayCache`)."""
    request.headers[NONCE_HEADER] = uuid.uuid4().hex


_LOADER: Any = None
_LOADER_LOCK = threading.Lock()


def _session() -> Any:
    """A fresh boto3 session (so each client resolves its credentials from the environment as it is now)
    sharing one data loader with every other: each session's own loader parsed and kept the MTurk service
    model again, 8 MiB per client, and a daemon makes a client per campaign (40 campaigns: 320 MiB)."""
    global _LOADER
    import boto3  # type: ignore[import-untyped]  # imported here: the built-in marketplace's JSON client needs none of it (0.13 s at each start)
    import botocore.loaders  # type: ignore[import-untyped]
    import botocore.session  # type: ignore[import-untyped]

    with _LOADER_LOCK:
        if _LOADER is None:
            _LOADER = botocore.loaders.create_loader()
        core = botocore.session.get_session()
        core.register_component("data_loader", _LOADER)
    return boto3.session.Session(botocore_session=core)


def make_client(marketplace: str, endpoint_url: str | None = None, *, production_ok: bool = False,
                max_rps: float = 20.0, retry_mode: str = "standard", max_attempts: int = 10,
                credentials: Credentials | None = None, credentials_file: Path | None = None,
                profile: str = "default") -> MarketClient:
    """`credentials` (or `credentials_file` + `profile`) name the requester account. Without them boto3's
    standard chain applies: right for MTurk and for a separately run built-in marketplace you configured
    (e.g. AWS_SHARED_CREDENTIALS_FILE=STATE/credentials); the daemon's own in-process marketplace always
    passes its account's credentials explicitly, so AWS keys in the environment never reach it."""
    if marketplace not in MARKETPLACES:
        raise ValueError(f"marketplace must be one of {', '.join(MARKETPLACES)}, got {marketplace!r}")
    if marketplace == "mturk" and not production_ok:
        raise ProductionNotAllowed("marketplace 'mturk' is real MTurk and spends real money; pass production_ok=True "
                                   "(the --production flag) to use it")
    import boto3
    from botocore.config import Config  # type: ignore[import-untyped]

    if credentials is None and credentials_file is not None:
        credentials = read_credentials_file(credentials_file, profile)
    config = Config(retries={"mode": retry_mode, "max_attempts": max_attempts}, max_pool_connections=20,
                    connect_timeout=10, read_timeout=60)
    kwargs: dict[str, Any] = {"region_name": "us-east-1", "config": config}
    if credentials is not None:
        kwargs["aws_access_key_id"] = credentials.access_key_id
        kwargs["aws_secret_access_key"] = credentials.secret_access_key
    if marketplace == "local":
        if not endpoint_url:
            raise ValueError("marketplace 'local' needs endpoint_url (the built-in marketplace's address)")
        if credentials is None and boto3.session.Session().get_credentials() is None:
            raise ValueError("marketplace 'local' needs the marketplace's requester credentials (credentials= or "
                             "credentials_file=, e.g. STATE/credentials written by 'campaign market serve')")
        kwargs["endpoint_url"] = endpoint_url
    else:
        kwargs["endpoint_url"] = endpoint_url or (SANDBOX_ENDPOINT if marketplace == "mturk-sandbox" else PRODUCTION_ENDPOINT)
    raw = _session().client("mturk", **kwargs)
    if marketplace == "local":
        raw.meta.events.register("before-sign.mturk", _sign_a_nonce)
    return MarketClient(raw, marketplace, kwargs.get("endpoint_url"), max_rps)
