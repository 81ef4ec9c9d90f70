"""The built-in marketplaces the whole test run shares (one per mode and starting balance, `SharedMarkets`),
with a requester account per test.

Starting a marketplace (its server thread, two sockets, a database) and a boto3 client costs a few tenths
of a second, several seconds on a loaded machine; most marketplace tests need neither a server nor a
client of their own, only an account nobody else uses. `SharedMarket.account()` gives a test such an
account: its own key pair (so its HITs, qualification types, blocks and balance are its own), the
shared boto3 client signing with that key pair, and a view of the server whose `credentials` are the
account's. When the test ends, the shared clock jumps past every HIT's lifetime, every assignment's
duration and auto-approval delay (so no HIT of one test is ever offered to the workers of the next),
and faults, sign-in failures and the site's hooks are reset.

What stays shared: the clock (it only moves forward; tests read it, never assume its value), the
workers (a worker id means one worker across tests) and the server itself. A test that stops, restarts
or reconfigures the server takes a marketplace of its own (`fresh_market` in tests/market)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from types import TracebackType
from typing import Any

from botocore.credentials import Credentials as BotoCredentials  # type: ignore[import-untyped]

from campaign.clock import ManualClock
from campaign.credentials import Credentials, write_credentials_file
from campaign.market.faults import FaultConfig
from campaign.market.server import RunningMarket, start_market
from campaign.market.signin_limits import SignInLimiter
from campaign.marketplaces.mturk_client import MarketClient, make_client

# A HIT page with the MTurk answer form and one text field, for tests that post HITs through a marketplace.
FORM_PAGE = """<!DOCTYPE html><html><body><form method="post" action="https://www.mturk.com/mturk/externalSubmit">
<input type="hidden" name="assignmentId" value=""><input type="text" name="answer"></form></body></html>"""
START = 1_800_000_000.0
# Past the longest HIT lifetime and assignment duration (a year each) and auto-approval delay (30 days).
AFTER_EVERYTHING = 400 * 86_400.0


class AccountView:
    """The shared marketplace as one account sees it: what RunningMarket offers, with the account's
    `credentials`; the accounts it adds are its own; it cannot be stopped (other tests use it)."""

    def __init__(self, server: RunningMarket, name: str, credentials: Credentials) -> None:
        self._server = server
        self.account = name
        self.credentials = credentials

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)

    def add_account(self, name: str) -> Credentials:
        """A further account of this test's, named after it (`test7-NAME`): another test's `NAME` is not it.
        Asked for again, the same account."""
        full = f"{self.account}-{name}"
        return self._server.accounts.credentials_of(full) or self._server.add_account(full)

    def stop(self) -> None:
        raise RuntimeError("the shared marketplace is not this test's to stop: take `fresh_market`")


def use_credentials(client: MarketClient, credentials: Credentials) -> None:
    """Point `client`'s request signer at `credentials`: one boto3 client for every account (making one
    takes 60-200 ms). botocore signs each request with the signer's current credentials."""
    client.raw._request_signer._credentials = BotoCredentials(credentials.access_key_id, credentials.secret_access_key)


class SharedMarket:
    """A marketplace in `mode` whose every new account starts with `balance`."""

    def __init__(self, folder: Path, mode: str = "sandbox", balance: str = "10000.00") -> None:
        self.clock = ManualClock(START)
        self.server = start_market(folder / "state", clock=self.clock, mode=mode, balance=Decimal(balance))
        creds_file = folder / "state" / "credentials"
        write_credentials_file(creds_file, "default", self.server.credentials)
        self.client = make_client("local", self.server.endpoint_url, credentials_file=creds_file, max_rps=0, max_attempts=2)
        self._names = itertools.count(1)

    @contextmanager
    def account(self) -> Iterator[tuple[AccountView, MarketClient]]:
        """A new requester account: (the server as it sees it, the shared client signing as it)."""
        name = f"test{next(self._names)}"
        creds = self.server.add_account(name)
        use_credentials(self.client, creds)
        try:
            yield AccountView(self.server, name, creds), self.client
        finally:
            self._clear()

    def _clear(self) -> None:
        self.clock.advance(AFTER_EVERYTHING)
        self.server.set_faults(FaultConfig())
        site = self.server.core.site
        site.limiter = SignInLimiter()
        for prefix in site.mounted():
            site.unmount(prefix)
        site.signin_providers.clear()

    def close(self) -> None:
        self.server.stop()

    def __enter__(self) -> SharedMarket:
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.close()


class SharedMarkets:
    """The run's shared marketplaces, one per (mode, balance of a new account), each started on first use."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._started: dict[tuple[str, str], SharedMarket] = {}

    def get(self, mode: str = "sandbox", balance: str = "10000.00") -> SharedMarket:
        key = (mode, balance)
        if key not in self._started:
            self._started[key] = SharedMarket(self.folder / f"{mode}-{balance}", mode=mode, balance=balance)
        return self._started[key]

    def close(self) -> None:
        for shared in self._started.values():
            shared.close()
        self._started.clear()
