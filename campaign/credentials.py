"""A requester's access key pair and the AWS shared-credentials file that carries it.

The built-in marketplace writes the file when it makes an account (`campaign market serve`, `campaign
market account add`); the MTurk client reads it (`campaign.marketplaces.mturk_client`). Both speak
the format boto3 reads, so the same file works for a separately run built-in marketplace.
"""

from __future__ import annotations

import configparser
import os
from dataclasses import dataclass
from pathlib import Path


class CredentialsError(ValueError):
    """The credentials file lacks the profile asked for."""


@dataclass(frozen=True)
class Credentials:
    """A requester's access key pair; `repr` never shows the secret."""

    access_key_id: str
    secret_access_key: str

    def __repr__(self) -> str:
        return f"Credentials(access_key_id={self.access_key_id!r}, secret_access_key='***')"


def write_credentials_file(path: Path, profile: str, creds: Credentials) -> None:
    """Adds or replaces one profile in an AWS shared-credentials file, created with mode 0600."""
    path = Path(path)
    ini = configparser.ConfigParser()
    if path.exists():
        ini.read(path, encoding="utf-8")
    ini[profile] = {"aws_access_key_id": creds.access_key_id, "aws_secret_access_key": creds.secret_access_key}
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    os.chmod(path, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        ini.write(fh)


def read_credentials_file(path: Path, profile: str = "default") -> Credentials:
    ini = configparser.ConfigParser()
    if not ini.read(Path(path), encoding="utf-8") or profile not in ini:
        raise CredentialsError(f"no profile [{profile}] in {path}")
    sec = ini[profile]
    return Credentials(sec["aws_access_key_id"], sec["aws_secret_access_key"])
