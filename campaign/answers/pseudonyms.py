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

from campaign.state import Keys
from campaign.store import Store

SECRET_KEY = Keys.PSEUDONYM_SECRET
PREFIX = "w-"


def campaign_secret(store: Store, campaign: str) -> bytes:
    """The campaign's pseudonym secret, made (32 random bytes) and stored the first time it is needed."""
    have = store.get_kv(campaign, SECRET_KEY)
    if have is None:
        # only if there is none yet: another export making it at the same moment keeps its own (a plain
        # write could replace a secret that export had already used, so its pseudonyms would match no other)
        store.swap_kv(campaign, SECRET_KEY, None, secrets.token_hex(32))
        have = store.get_kv(campaign, SECRET_KEY)
        assert have is not None
    return bytes.fromhex(have)


def pseudonym(secret: bytes, worker_id: str) -> str:
    """`w-` and 16 hex digits (64 bits: no collision among a campaign's workers in practice)."""
    return PREFIX + hmac.new(secret, worker_id.encode("utf-8"), hashlib.sha256).hexdigest()[:16]
