"""`campaign crowd run --prolific-url URL`: the simulated participants of a spec's `marketplace: prolific`
campaigns, playing Prolific participants against a standalone emulator (`campaign prolific serve`), as
the daemon plays them in-process for `prolific-local`.

Each campaign's crowd is the same people as `prolific-local` would make of it (pool seeded by the run's
seed, registered under the campaign's name: external ids `sim:<campaign>:<worker>`), signed up through
the emulator's operator route (`POST /emulator/participants`, the research token of a caller on the
emulator's machine), so a restarted crowd gets the same participants back. They take the studies the
emulator lists for them and reach the task site at the campaign's `task_site.public_url`.

Which studies a campaign's crowd takes: with one campaign per emulator, every study open to its
participants; with several, the studies whose `external_study_url` points at the campaign's own task
site cannot tell them apart (campaigns of one run share it), so a study is taken by the crowd whose
campaign's stage titles include the study's name.

The token comes from `PROLIFIC_TOKEN` or a file (the emulator's `--state DIR/token`), never from a
command-line value (which `ps` and shell histories show).
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from campaign.clock import Clock
from campaign.spec import Campaign, loopback_url

TOKEN_ENV = "PROLIFIC_TOKEN"
BASE_ENV = "PROLIFIC_BASE_URL"


class ProlificCrowdError(Exception):
    """Why the participants cannot be played (said to the operator, exit 2)."""


def emulator_root(url: str) -> str:
    """The emulator's root from its API base (`http://host:port/api/v1/` -> `http://host:port`)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProlificCrowdError(f"--prolific-url {url!r} is not an http(s) URL")
    return f"{parts.scheme}://{parts.netloc}"


def read_token(token_file: Path | None) -> str:
    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ProlificCrowdError(f"cannot read the token file {token_file}: {exc.strerror}") from None
        if not token:
            raise ProlificCrowdError(f"the token file {token_file} is empty")
        return token
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise ProlificCrowdError(f"set {TOKEN_ENV} to the emulator's token (what `campaign prolific serve` prints), "
                                 "or give --prolific-token-file")
    return token


def participant_crowds(campaigns: Sequence[Campaign], seed: int, clock: Clock, url: str | None,
                       token_file: Path | None) -> list[Any]:
    """One `ParticipantCrowd` per campaign (not started). Only an emulator on this machine is played:
    simulated participants must never take places on the real Prolific, where real people would meet
    them and be paid for their answers."""
    from campaign.crowd.adversaries import assign
    from campaign.crowd.models import make_pool
    from campaign.crowd.participants import ParticipantCrowd
    from campaign.inputs import load_items, load_truth

    url = url or os.environ.get(BASE_ENV)
    if not url:
        raise ProlificCrowdError(f"give --prolific-url (the emulator's PROLIFIC_BASE_URL) or set {BASE_ENV}")
    if not loopback_url(url):
        raise ProlificCrowdError(f"{url} is not on this machine: simulated participants play only a Prolific emulator "
                                 "(`campaign prolific serve`), never the real Prolific")
    root = emulator_root(url)
    token = read_token(token_file)
    several = len(campaigns) > 1
    crowds = []
    for c in campaigns:
        if not c.public_url:
            raise ProlificCrowdError(f"campaign {c.name!r} has no task_site.public_url for its participants to reach")
        truth = load_truth(c.crowd.truth) if c.crowd.truth else {}
        by_text = {it.text: truth.get(it.key, 0.5) for it in load_items(c.input_kind, c.input_path)}
        workers = make_pool(c.crowd.workers, seed, dict(c.crowd.mix), arrival_span=c.crowd.arrival_span)
        titles = {s.title for s in c.stages}

        def wants(row: dict[str, Any], titles: set[str] = titles) -> bool:
            return str(row.get("name", "")) in titles

        crowds.append(ParticipantCrowd(root, token, c.public_url, workers, by_text, seed=seed, clock=clock, poll=0.05,
                                       namespace=c.name, wants=wants if several else None,
                                       adversaries=assign(workers, c.crowd.adversaries, seed)))
    return crowds
