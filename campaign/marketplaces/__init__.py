"""The marketplace adapters: what the steps call (`campaign.marketplaces.base.Marketplace` and its
optional capabilities) and one implementation per API (`mturk`, `prolific`). Which adapter a campaign
gets, and what a run starts for it, is its provider's business (`campaign.providers`); `open_marketplace`
opens an MTurk-API adapter by marketplace name where no run is involved (tools, tests)."""

from __future__ import annotations

from typing import Any

from campaign.marketplaces.base import Marketplace
from campaign.marketplaces.mturk import open_mturk

MTURK_API = ("local", "mturk-sandbox", "mturk")


def open_marketplace(name: str, endpoint_url: str | None = None, *, production_ok: bool = False,
                     **options: Any) -> Marketplace:
    if name not in MTURK_API:
        raise ValueError(f"marketplace must be one of {', '.join(MTURK_API)}, got {name!r}")
    return open_mturk(name, endpoint_url, production_ok=production_ok, **options)
