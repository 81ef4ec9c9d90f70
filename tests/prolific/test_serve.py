"""`campaign prolific serve`: the emulator standalone, as a researcher starts it from a shell; it prints
the two lines to export and answers the client with that token; a restart keeps the token."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from campaign.prolific.client import ProlificClient
from campaign.prolific.emulator.participant import add_participant

pytestmark = pytest.mark.prolific


def _start(state: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen([sys.executable, "-m", "campaign", "prolific", "serve", "--port", "0", "--state", str(state)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    assert proc.stdout is not None
    found: dict[str, str] = {}
    for _ in range(5):
        line = proc.stdout.readline()
        if not line:
            break
        if "=" in line and line.split("=", 1)[0] in ("PROLIFIC_BASE_URL", "PROLIFIC_TOKEN"):
            key, value = line.strip().split("=", 1)
            found[key] = value
        if len(found) == 2:
            break
    if len(found) < 2:
        proc.kill()
        raise AssertionError(f"no URL and token printed: {proc.communicate(timeout=10)}")
    return proc, found


def _stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def test_serve_prints_the_url_and_token_and_answers_with_them(tmp_path: Path) -> None:
    proc, env = _start(tmp_path / "em")
    try:
        api = ProlificClient(env["PROLIFIC_BASE_URL"], env["PROLIFIC_TOKEN"], max_retries=0)
        assert env["PROLIFIC_BASE_URL"].endswith("/api/v1/")
        assert api.me()["id"]
        workspace = api.workspaces()[0]["id"]
        root = env["PROLIFIC_BASE_URL"].removesuffix("/api/v1/")
        person = add_participant(root, env["PROLIFIC_TOKEN"], country="GB", languages=["English"])
        assert person.studies() == []
        group = api.create_group("kept", workspace)["id"]
    finally:
        assert _stop(proc) == 0
    again, env2 = _start(tmp_path / "em")
    try:
        assert env2["PROLIFIC_TOKEN"] == env["PROLIFIC_TOKEN"]  # the same state keeps the same token
        api = ProlificClient(env2["PROLIFIC_BASE_URL"], env2["PROLIFIC_TOKEN"], max_retries=0)
        assert group in [g["id"] for g in api.groups(workspace)]
    finally:
        assert _stop(again) == 0


def test_the_module_entry_point_names_the_command(tmp_path: Path) -> None:
    """`python -m campaign.prolific.emulator.server` used to define `main` and never run it (printing nothing)."""
    proc = subprocess.run([sys.executable, "-m", "campaign.prolific.emulator.server", "--port", "0", "--state",
                           str(tmp_path / "em")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "campaign prolific serve" in proc.stderr
