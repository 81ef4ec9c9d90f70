"""Stable per-campaign pseudonyms for worker ids and Prolific participant ids.

A pseudonym is an HMAC-SHA256 of the id under a random secret that belongs to the campaign and lives
only in its store (`kv` key `pseudonym_secret`), made on first use. So the same person has the same
pseudonym in every export of one campaign (answers can be joined across exports), different ones in
different campaigns (exports of two campaigns cannot be joined on it), and nobody who has an export but
not the store can go from a known id to its pseudonym or back: a plain hash of an id could be reversed
by hashing every id one suspects.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlalchemy.exc import IntegrityError

from campaign.state import Keys
from campaign.store import Store

SECRET_KEY = Keys.PSEUDONYM_SECRET
PREFIX = "w-"


def campaign_secret(store: Store, campaign: str) -> bytes:
    """The campaign's pseudonym secret, made (32 random bytes) and stored the first time it is needed."""
    have = store.get_kv(campaign, SECRET_KEY)
    if have is None:
        try:
            store.set_kv(campaign, SECRET_KEY, secrets.token_hex(32))
        except IntegrityError:  # another export made it at the same moment: use theirs
            pass
        have = store.get_kv(campaign, SECRET_KEY)
        assert have is not None
    return bytes.fromhex(have)


def pseudonym(secret: bytes, worker_id: str) -> str:
    """`w-` and 16 hex digits (64 bits: no collision among a campaign's workers in practice)."""
    return PREFIX + hmac.new(secret, worker_id.encode("utf-8"), hashlib.sha256).hexdigest()[:16]
