"""The installed wheel works away from the checkout: built with `pip wheel --no-deps`, installed into a
fresh venv in a temporary folder (dependencies from the running interpreter's site-packages, so no
network), it renders HITs from its packaged templates and runs the demo to `finished`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.support.cli import campaign_cmd, clean_env
from tests.support.paths import ROOT


def _run(cmd: list[str], cwd: Path, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert out.returncode == 0, f"{' '.join(cmd)}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.mark.slow
def test_the_wheel_installs_in_a_fresh_venv_and_runs_the_demo(tmp_path):
    src = tmp_path / "src"  # build from a copy: an in-tree build would leave build/ and egg-info in the checkout
    src.mkdir()
    for name in ("campaign", "hit_templates"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(src)], cwd=tmp_path)
    wheel = next(dist.glob("campaign-*.whl"))

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp_path).stdout.strip())
    # the dependencies come from the interpreter running the tests (no network); `campaign` itself does not
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)], cwd=tmp_path)

    work = tmp_path / "demo"  # away from the checkout: nothing importable from the current directory
    work.mkdir()
    shutil.copy(ROOT / "campaigns.yaml", work / "campaigns.yaml")
    shutil.copytree(ROOT / "examples", work / "examples")
    env = clean_env(["PYTHONPATH"])
    where = _run([str(python), "-c", "import campaign, hit_templates; print(campaign.__file__); print(hit_templates.__file__)"],
                 cwd=work, env=env).stdout.split()
    assert all(Path(p).is_relative_to(site) for p in where), where
    _run(campaign_cmd("run", "--state", "state", "--seed", "0", "--quiet", "--max-seconds", "400", python=python),
         cwd=work, env=env, timeout=500)
    for name in ("water-bottles", "water-nuggets"):
        rows = (work / "state" / name / "scores.csv").read_text(encoding="utf-8").splitlines()
        assert rows[0].startswith("rank,item,score") and len(rows) > 50
    assert (work / "state" / "water-nuggets" / "gold_nuggets.jsonl").stat().st_size > 0
