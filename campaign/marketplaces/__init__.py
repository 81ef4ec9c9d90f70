"""Marketplaces by name: the steps talk to `campaign.marketplaces.base.Marketplace`, and this registry
opens the one a campaign's `marketplace:` names. A new marketplace (Prolific, ...) is a module with a
class implementing the protocol and a `register("name", factory)` call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from campaign.marketplaces.base import Marketplace
from campaign.marketplaces.mturk import missing_aws_credentials, open_mturk

Factory = Callable[..., Marketplace]  # (name, endpoint_url, *, production_ok, **options) -> Marketplace

_FACTORIES: dict[str, Factory] = {name: open_mturk for name in ("local", "mturk-sandbox", "mturk")}


#: (name, endpoint_url) -> why a run cannot use this marketplace now (e.g. no credentials), or None
Preflight = Callable[[str, "str | None"], "str | None"]

_PREFLIGHTS: dict[str, Preflight] = {}


def register(name: str, factory: Factory, preflight: Preflight | None = None) -> None:
    _FACTORIES[name] = factory
    if preflight is not None:
        _PREFLIGHTS[name] = preflight


def preflight(name: str, endpoint_url: str | None = None) -> str | None:
    """What stops a run from using marketplace `name` at all, said before any state is written (a run
    that started anyway would retry the refused calls forever while holding its reservations)."""
    check = _PREFLIGHTS.get(name)
    return check(name, endpoint_url) if check is not None else None


def names() -> tuple[str, ...]:
    return tuple(_FACTORIES)


def open_marketplace(name: str, endpoint_url: str | None = None, *, production_ok: bool = False,
                     **options: Any) -> Marketplace:
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ValueError(f"marketplace must be one of {', '.join(_FACTORIES)}, got {name!r}") from None
    return factory(name, endpoint_url, production_ok=production_ok, **options)


for _name in ("mturk-sandbox", "mturk"):  # the built-in marketplace (`local`) brings its own account
    _PREFLIGHTS[_name] = missing_aws_credentials
