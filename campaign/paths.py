"""Where things live: the shared real-data folder (present in CI, absent on a fresh clone)."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def shared_data_dir() -> Path | None:
    """`../shared/data` beside the checkout (or $CAMPAIGN_SHARED_DATA); None when absent."""
    env = os.environ.get("CAMPAIGN_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates += [PROJECT_ROOT.parent / "shared" / "data", Path.cwd().parent / "shared" / "data"]
    for c in candidates:
        if c.is_dir():
            return c
    return None


def require_shared_data(name: str) -> Path:
    """The folder of one real data set, or a clear error saying why it is missing."""
    base = shared_data_dir()
    if base is None or not (base / name).is_dir():
        raise FileNotFoundError(
            f"real crowd data '{name}' not found: expected ../shared/data/{name} beside the checkout "
            "(or set CAMPAIGN_SHARED_DATA); it is present in CI and absent on a fresh clone"
        )
    return base / name
