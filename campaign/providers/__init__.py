"""Marketplace providers by name: one registered `Provider` (`campaign.providers.base`) per `marketplace:`
a spec may name. A new marketplace is one provider object and one `register` call; a test registers one
for a block only with `registered`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from campaign.providers.base import Provider
from campaign.providers.mturk import MTurkProvider
from campaign.providers.prolific import ProlificProvider
from campaign.spec import Campaign

_PROVIDERS: dict[str, Provider] = {}


def register(provider: Provider, *, replace: bool = False) -> Provider:
    old = _PROVIDERS.get(provider.name)
    if old is not None and old is not provider and not replace:
        raise ValueError(f"marketplace {provider.name!r} already has a provider ({type(old).__name__})")
    _PROVIDERS[provider.name] = provider
    return provider


@contextmanager
def registered(provider: Provider, *, replace: bool = False) -> Iterator[Provider]:
    """`provider` registered inside the block only; the one it replaced (if any) is back afterwards."""
    before = _PROVIDERS.get(provider.name)
    register(provider, replace=replace)
    try:
        yield provider
    finally:
        if before is None:
            _PROVIDERS.pop(provider.name, None)
        else:
            _PROVIDERS[provider.name] = before


def get(name: str) -> Provider:
    try:
        return _PROVIDERS[name]
    except KeyError:
        raise KeyError(f"marketplace {name!r} has no provider; known: {', '.join(_PROVIDERS)}") from None


def names() -> tuple[str, ...]:
    return tuple(_PROVIDERS)


def of(campaign: Campaign) -> Provider:
    return get(campaign.marketplace)


def grouped(campaigns: Sequence[Campaign]) -> list[tuple[Provider, list[Campaign]]]:
    """The campaigns by provider, providers in registration order (what a run starts first comes first)."""
    by_name: dict[str, list[Campaign]] = {}
    for c in campaigns:
        get(c.marketplace)  # an unknown name fails here, before anything starts
        by_name.setdefault(c.marketplace, []).append(c)
    return [(p, by_name[name]) for name, p in _PROVIDERS.items() if name in by_name]


register(MTurkProvider("local", builtin=True))
register(MTurkProvider("mturk-sandbox"))
register(MTurkProvider("mturk", real_money=True))
register(ProlificProvider("prolific", emulated=False))
register(ProlificProvider("prolific-local", emulated=True))
