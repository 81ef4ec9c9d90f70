"""Marketplaces by name: the steps talk to `campaign.marketplaces.base.Marketplace`, and this registry
opens the one a campaign's `marketplace:` names. A new marketplace (Prolific, ...) is a module with a
class implementing the protocol and a `register("name", factory)` call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from campaign.marketplaces.base import Marketplace
from campaign.marketplaces.mturk import open_mturk

Factory = Callable[..., Marketplace]  # (name, endpoint_url, *, production_ok, **options) -> Marketplace

_FACTORIES: dict[str, Factory] = {name: open_mturk for name in ("local", "mturk-sandbox", "mturk")}


def register(name: str, factory: Factory) -> None:
    _FACTORIES[name] = factory


def names() -> tuple[str, ...]:
    return tuple(_FACTORIES)


def open_marketplace(name: str, endpoint_url: str | None = None, *, production_ok: bool = False,
                     **options: Any) -> Marketplace:
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ValueError(f"marketplace must be one of {', '.join(_FACTORIES)}, got {name!r}") from None
    return factory(name, endpoint_url, production_ok=production_ok, **options)
