"""`campaign` the way a user starts it: as a subprocess (`python -m campaign ...`, `run_campaign`,
`start_campaign`) or in the test's own process (`cli`, the same entry point `python -m campaign` calls;
`cli_output`, the same with its exit code and output kept as `run_campaign` keeps them, for a command
whose test needs no process of its own: a new interpreter costs about a second, several under load).

Every environment built here drops CAMPAIGN_TEST_CRASH: a crash point set in the shell that runs pytest
(or left by a test) must never reach a daemon a test starts, or it dies where the test did not aim it.
A test that wants a crash passes it in `extra`. PYTHONPATH is the repository, so a child started in any
folder runs this checkout's code (not whatever an editable install points at)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
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
    `*` drops every name with that prefix), PYTHONPATH the repository (unless dropped), then `extra` on top."""
    prefixes = tuple(d[:-1] for d in drop if d.endswith("*"))
    names = {CRASH, *(d for d in drop if not d.endswith("*"))}
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if k not in names and not (prefixes and k.startswith(prefixes))}
    if "PYTHONPATH" not in names and not (prefixes and "PYTHONPATH".startswith(prefixes)):
        env["PYTHONPATH"] = str(ROOT)
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


def kill_at(args: list[str], delays: Iterable[float], env: Mapping[str, str] | None = None) -> None:
    """Start `campaign ARGS` once for each delay and SIGKILL it that many seconds later (a daemon killed at
    arbitrary instants, output discarded); each is reaped before the next starts."""
    for delay in delays:
        p = start_campaign(*args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(delay)
        finally:
            p.send_signal(signal.SIGKILL)
            p.wait()


def run_args(config: str | Path, state: str | Path, *extra: str | Path, seed: int | None = None, quiet: bool = True) -> list[str]:
    """`run --config CONFIG --state STATE [--seed N] [--quiet] EXTRA`: the arguments of a daemon run."""
    args = ["run", "--config", str(config), "--state", str(state)]
    if seed is not None:
        args += ["--seed", str(seed)]
    if quiet:
        args.append("--quiet")
    return args + [str(e) for e in extra]


def cli(*args: str | Path) -> int:
    """`campaign ARGS` in this process, through the entry point `python -m campaign` calls; its exit code.
    Output goes to this process's stdout/stderr (read it with capsys)."""
    from campaign.cli import main

    return main([str(a) for a in args])


def cli_output(*args: str | Path, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    """`campaign ARGS` in this process, in the folder `cwd` and with `env` set for the call (COLUMNS=...):
    its exit code (argparse's exit included) and what it wrote to stdout and stderr, as `run_campaign`
    gives them. For commands that start no daemon; a `run` keeps its own process."""
    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in env}
    here = os.getcwd()
    try:
        os.environ.update(env)
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli(*args)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(here)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return subprocess.CompletedProcess(["campaign", *(str(a) for a in args)], code, out.getvalue(), err.getvalue())

