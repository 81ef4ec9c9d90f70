"""`campaign` as a subprocess, the way a user starts it (`python -m campaign ...` in the repository).

Every environment built here drops CAMPAIGN_TEST_CRASH: a crash point set in the shell that runs pytest
(or left by a test) must never reach a daemon a test starts, or it dies where the test did not aim it.
A test that wants a crash passes it in `extra`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.support.paths import ROOT

CRASH = "CAMPAIGN_TEST_CRASH"


def campaign_cmd(*args: str | Path, python: str | Path = sys.executable) -> list[str]:
    """The argv of `campaign ARGS` run by `python` (this interpreter unless a test installs another)."""
    return [str(python), "-m", "campaign", *(str(a) for a in args)]


def clean_env(drop: Iterable[str] = (), base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """`base` (os.environ by default) without CAMPAIGN_TEST_CRASH and the names in `drop` (a name ending in
    `*` drops every name with that prefix), then `extra` set on top."""
    prefixes = tuple(d[:-1] for d in drop if d.endswith("*"))
    names = {CRASH, *(d for d in drop if not d.endswith("*"))}
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if k not in names and not (prefixes and k.startswith(prefixes))}
    env.update(extra)
    return env


def run_campaign(*args: str | Path, cwd: Path = ROOT, env: Mapping[str, str] | None = None, timeout: float | None = 120,
                 check: bool = False, python: str | Path = sys.executable) -> subprocess.CompletedProcess[str]:
    """Run `campaign ARGS` to its end; output captured as text. `env` defaults to `clean_env()`."""
    return subprocess.run(campaign_cmd(*args, python=python), cwd=cwd, env=dict(clean_env() if env is None else env),
                          capture_output=True, text=True, timeout=timeout, check=check)


def start_campaign(*args: str | Path, cwd: Path = ROOT, env: Mapping[str, str] | None = None,
                   **popen: Any) -> subprocess.Popen:
    """Start `campaign ARGS` in the background (a daemon, `market serve`); `popen` goes to subprocess.Popen
    (stdout=, stderr=, text=). `env` defaults to `clean_env()`."""
    return subprocess.Popen(campaign_cmd(*args), cwd=cwd, env=dict(clean_env() if env is None else env), **popen)


def run_args(config: Path, state: Path, *extra: str | Path, seed: int | None = None, quiet: bool = True) -> list[str]:
    """`run --config CONFIG --state STATE [--seed N] [--quiet] EXTRA`: the arguments of a daemon run."""
    args = ["run", "--config", str(config), "--state", str(state)]
    if seed is not None:
        args += ["--seed", str(seed)]
    if quiet:
        args.append("--quiet")
    return args + [str(e) for e in extra]
