"""The campaign's pseudonym secret (`campaign.answers.pseudonyms.campaign_secret`), made once."""

from __future__ import annotations

from campaign.answers.pseudonyms import SECRET_KEY, campaign_secret, pseudonym
from campaign.store import Store


def test_two_exports_making_the_secret_at_once_use_the_same_one(tmp_path) -> None:
    """Before: an export that found no secret wrote its own over one another export had just made and used,
    so the pseudonyms of that other export matched no later export of the campaign."""
    store = Store.open(tmp_path / "state")
    try:
        real_get = store.get_kv
        other = "ab" * 32
        calls = {"n": 0}

        def get_kv(campaign, key, default=None):
            calls["n"] += 1
            if calls["n"] == 1:  # this export looks first and finds none; the other one then makes its own
                real_get(campaign, key, default)
                store.set_kv(campaign, key, other)
                return default
            return real_get(campaign, key, default)

        store.get_kv = get_kv
        mine = campaign_secret(store, "c")
        assert mine.hex() == other and real_get("c", SECRET_KEY) == other
        store.get_kv = real_get
        assert pseudonym(campaign_secret(store, "c"), "W1") == pseudonym(bytes.fromhex(other), "W1")
        fresh = campaign_secret(store, "d")  # a campaign without one gets one of its own, kept
        assert len(fresh) == 32 and campaign_secret(store, "d") == fresh and fresh.hex() != other
    finally:
        store.close()
