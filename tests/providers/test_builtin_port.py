"""The built-in marketplace keeps its addresses across restarts of a state folder: without `--market-port`
its worker site and content origin take the ports they had last time when those are free (workers' links,
studies' URLs, webhook subscriptions and the signed frame links of open pages name them), and any free
ports, with a warning, when something else holds one."""

from __future__ import annotations

import logging
import socket
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from campaign.clock import WallClock
from campaign.providers.base import RunServices, SiteNeeds
from campaign.providers.builtin import PORT_FILE, last_ports, start_site
from campaign.store import Store


def _port(url: str) -> int:
    port = urllib.parse.urlsplit(url).port
    assert port is not None
    return port


def _start(tmp_path: Path, store: Store, market_port: int = 0) -> int:
    return _start_both(tmp_path, store, market_port)[0]


def _start_both(tmp_path: Path, store: Store, market_port: int = 0) -> tuple[int, int]:
    services = RunServices(store=store, clock=WallClock(), state_dir=tmp_path / "state", seed=0, market_port=market_port)
    site = start_site(services, SiteNeeds(in_process=True))
    try:
        return _port(site.endpoint_url), _port(site.content_url)
    finally:
        site.running.stop()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(tmp_path / "state")
    yield s
    s.close()


def test_a_restart_takes_the_last_ports_again(tmp_path: Path, store: Store) -> None:
    first = _start_both(tmp_path, store)
    assert last_ports(tmp_path / "state" / "market") == first
    assert _start_both(tmp_path, store) == first
    (tmp_path / "state" / "market" / PORT_FILE).write_text(f"{first[0]}\n")  # a file from before the content port
    assert _start(tmp_path, store) == first[0]


def test_a_taken_port_is_no_error_and_the_new_one_is_remembered(tmp_path: Path, store: Store,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    first = _start(tmp_path, store)
    holder = socket.socket()
    holder.bind(("127.0.0.1", first))
    holder.listen()
    try:
        with caplog.at_level(logging.WARNING):
            second = _start(tmp_path, store)
    finally:
        holder.close()
    assert second != first and (last_ports(tmp_path / "state" / "market") or (0,))[0] == second
    assert f"last port ({first})" in caplog.text


def test_an_explicit_port_wins_and_garbage_in_the_file_is_ignored(tmp_path: Path, store: Store) -> None:
    _start(tmp_path, store)
    with socket.socket() as probe:  # a free port to ask for
        probe.bind(("127.0.0.1", 0))
        wanted = probe.getsockname()[1]
    assert _start(tmp_path, store, market_port=wanted) == wanted
    for junk in ("", "not a port", "80", "70000", "2000 80", "2000 3000 4000", "\x00\xff"):
        (tmp_path / "state" / "market" / PORT_FILE).write_bytes(junk.encode("latin-1"))
        assert last_ports(tmp_path / "state" / "market") is None
        assert _start(tmp_path, store) > 0
