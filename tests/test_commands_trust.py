"""Small things that cost a new user's trust: `validate --config`, quiet library logging, MTurk without
credentials refused at start (not retried forever)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import clean_env, cli, cli_output, run_args
from tests.support.paths import ROOT, WATER
from tests.support.specs import NO_CROWD, campaign, write_spec


def test_validate_takes_the_spec_as_config_as_run_does(capsys):
    assert cli("validate", "--config", ROOT / "campaigns.yaml") == 0
    assert capsys.readouterr().out.rstrip().endswith("ok")


def test_validate_refuses_two_different_spec_files(capsys):
    assert cli("validate", ROOT / "campaigns.yaml", "--config", ROOT / "examples" / "two-stage.yaml") == 2
    assert "two spec files" in capsys.readouterr().err


def _log_first_store(tmp_path: Path, level: str | None) -> str:
    """Stderr of a fresh process that configures logging as `campaign run` does, then creates a store."""
    code = ("import sys; from pathlib import Path; from campaign.commands import configure_logging; "
            "from campaign.store import Store; import logging; "
            f"configure_logging({level!r}); Store.open(Path(sys.argv[1]), None).close(); "
            "logging.getLogger('campaign.daemon').info('campaign info shown')")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "state")], env=clean_env(),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stderr


def test_first_run_logs_no_alembic_info_but_the_campaigns_own(tmp_path):
    err = _log_first_store(tmp_path, None)
    assert "INFO alembic" not in err, err
    assert "campaign info shown" in err


def test_debug_shows_library_logging(tmp_path):
    assert "INFO alembic" in _log_first_store(tmp_path, "DEBUG")


@pytest.mark.parametrize("marketplace", ["mturk-sandbox", "mturk"])
def test_run_refuses_mturk_without_aws_credentials(tmp_path, marketplace, monkeypatch):
    task = {"kind": "likert", "items_per_hit": 5, "assignments": 3, "reward": "0.05"}
    spec = write_spec(tmp_path / "spec.yaml", campaign("sandboxed", topic="t", propositions=WATER / "propositions.tsv", task=task,
                                                       budget="5.00", marketplace=marketplace, crowd=NO_CROWD, poll_interval=None))
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    out = cli_output(*run_args(spec, tmp_path / "state", "--production", "--max-seconds", "8"), cwd=tmp_path, HOME=str(tmp_path),
                     AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_CONFIG_FILE=str(tmp_path / "none"),
                     AWS_EC2_METADATA_DISABLED="true")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "needs AWS credentials" in out.stderr
    assert "NoCredentialsError" not in out.stderr


def test_configure_logging_is_what_run_uses():
    import inspect

    from campaign import commands

    assert "configure_logging(args.log_level" in inspect.getsource(commands.cmd_run)
