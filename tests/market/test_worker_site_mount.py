"""The worker site's extension point: another way in (the Prolific door, or anything else) is mounted
under a path prefix of its own (`WorkerSite.mount`), answers every request there, and no two share a
prefix; the built-in marketplace's own paths cannot be taken over."""

from __future__ import annotations

import urllib.request
from typing import Any

import pytest

from campaign.market.worker_site import Reply, SiteExtension


class Echo:
    """A minimal extension: answers with the path it was asked for; serves no assignment."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def route(self, method: str, path: str, query: dict[str, str], body: bytes) -> Reply | None:
        self.asked.append(path)
        return Reply(200, "text/plain; charset=utf-8", f"echo {path} {query.get('x', '')}".encode())

    def serves(self, assignment_id: str) -> bool:
        return False

    def check_frame(self, assignment_id: str) -> None:
        raise AssertionError("never asked: it serves no assignment")

    def external_submit(self, assignment_id: str, fields: list[tuple[str, str]]) -> dict[str, Any] | None:
        return None


def test_an_extension_answers_every_request_under_its_prefix(market) -> None:
    echo = Echo()
    assert isinstance(echo, SiteExtension)
    market.server.mount("/echo/", echo)
    with urllib.request.urlopen(f"{market.server.endpoint_url}/echo/any/path?x=1", timeout=10) as r:
        assert (r.status, r.read()) == (200, b"echo /echo/any/path 1")
    assert echo.asked == ["/echo/any/path"]
    assert market.server.core.site.mounted() == {"/echo/": echo}


@pytest.mark.parametrize("prefix", ["/echo/", "/echo/inner/", "/"])
def test_a_prefix_taken_or_around_a_taken_one_is_refused(market, prefix: str) -> None:
    market.server.mount("/echo/", Echo())
    with pytest.raises(ValueError):
        market.server.mount(prefix, Echo())


@pytest.mark.parametrize("prefix", ["/worker/", "/mturk/", "echo", "/echo"])
def test_the_marketplaces_own_paths_and_malformed_prefixes_are_refused(market, prefix: str) -> None:
    with pytest.raises(ValueError):
        market.server.mount(prefix, Echo())
    assert market.server.core.site.mounted() == {}
