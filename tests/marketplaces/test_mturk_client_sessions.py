"""Clients made in one process share boto3's parsed service model (a daemon makes one per campaign; a
fresh session each cost 8 MiB) but not credentials: each client still finds the ones the environment
names when it is made."""

from __future__ import annotations

from campaign.marketplaces.mturk_client import make_client


def _key(client) -> str:  # type: ignore[no-untyped-def]
    return str(client.raw._request_signer._credentials.access_key)


def test_each_client_reads_the_credentials_file_the_environment_names_now(tmp_path, monkeypatch):
    for name in ("a", "b"):
        (tmp_path / name).write_text(f"[default]\naws_access_key_id = KEY{name.upper()}\naws_secret_access_key = s{name}\n")
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "a"))
    first = make_client("local", "http://127.0.0.1:1")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "b"))
    second = make_client("local", "http://127.0.0.1:1")
    assert (_key(first), _key(second)) == ("KEYA", "KEYB")
    # and one loader (which keeps the parsed model) serves both; separate sessions had one each
    assert first.raw._loader is second.raw._loader
