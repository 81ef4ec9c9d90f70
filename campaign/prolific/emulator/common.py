"""What every part of the Prolific emulator shares: the error answer, ids and times as the description
gives them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from campaign.ids import random_bytes


class ApiError(Exception):
    """An answer in Prolific's error shape: `{"error": {"status", "error_code", "title", "detail"}}`."""

    def __init__(self, status: int, detail: Any, title: str | None = None) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail
        self.title = title or {400: "Bad request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found",
                               405: "Method not allowed", 429: "Too many requests"}.get(status, "Error")

    def body(self) -> dict[str, Any]:
        return {"error": {"status": self.status, "error_code": self.status * 100, "title": self.title, "detail": self.detail}}


def not_found(what: str) -> ApiError:
    """An unknown or foreign object: the description lists only 400 for the research operations' errors."""
    return ApiError(400, f"{what} not found.", title="Not found")


def iso(t: float | None) -> str | None:
    """A time as the description gives every time: an ISO 8601 date-time string (UTC)."""
    return None if t is None else datetime.fromtimestamp(float(t), UTC).isoformat().replace("+00:00", "Z")


def new_id() -> str:
    return random_bytes(12, "prolific").hex()  # Prolific ids are 24 hex characters (from the seed in a simulation: campaign.ids)
