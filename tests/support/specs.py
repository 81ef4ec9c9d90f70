"""Campaign specs for tests, built from Python values and written as YAML: one place knows the spec's
shape, so a test says only what is particular to it (its kind, budget, crowd) and a change to the spec
format is made here once.

`campaign(...)` is one entry of `campaigns:`; `simulated(...)` its simulated crowd; `write_spec` writes
one or more entries to a file. Values are written as YAML sees them: money as strings ("0.06"), paths as
their text."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from campaign.spec import SpecError, load_spec
from tests.support.paths import WATER

TOPIC = "Should plastic water bottles be banned?"


def _plain(value: Any) -> Any:
    """Paths as text, the rest as it is (recursively), so yaml.safe_dump can write it."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def simulated(workers: int, *, speed: float | None = None, arrival_span: str | None = None,
              truth: Path | str | None = WATER / "truth.tsv", mix: Mapping[str, float] | None = None,
              **extra: Any) -> dict[str, Any]:
    """A `crowd: kind: simulated` block; `speed`, `arrival_span`, `mix` only where given."""
    crowd: dict[str, Any] = {"kind": "simulated", "workers": workers}
    if mix is not None:
        crowd["mix"] = dict(mix)
    if speed is not None:
        crowd["speed"] = speed
    if arrival_span is not None:
        crowd["arrival_span"] = arrival_span
    if truth is not None:
        crowd["truth"] = truth
    return crowd | extra


NO_CROWD: dict[str, Any] = {"kind": "none"}


def campaign(name: str, *, budget: str, crowd: Mapping[str, Any] | None, task: Mapping[str, Any] | None = None,
             stages: list[Mapping[str, Any]] | None = None, propositions: Path | str | None = None,
             documents: Path | str | None = None, topic: str = TOPIC, poll_interval: float | None = 0.2,
             marketplace: str | None = None, quality: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """One campaign: its input (`propositions` or `documents`; the demo's propositions by default), a `task`
    or `stages`, `budget`, `crowd` (None: no crowd block), and `schedule: poll_interval` (None: no schedule
    block); `marketplace` and `quality` where given. `extra` holds further top-level keys (prolific,
    task_site ...), written after the task."""
    if (task is None) == (stages is None):
        raise ValueError("a campaign has a task or stages, not both")
    data: dict[str, Any] = {"name": name, "topic": topic}
    data["input"] = {"documents": documents} if documents is not None else {
        "propositions": WATER / "propositions.tsv" if propositions is None else propositions}
    if task is not None:
        data["task"] = dict(task)
    else:
        data["stages"] = [dict(s) for s in stages or ()]
    if marketplace is not None:
        data["marketplace"] = marketplace
    if quality is not None:
        data["quality"] = dict(quality)
    data.update(extra)
    data["budget"] = budget
    if crowd is not None:
        data["crowd"] = dict(crowd)
    if poll_interval is not None:
        data["schedule"] = {"poll_interval": poll_interval}
    return data


def spec_yaml(*campaigns: Mapping[str, Any]) -> str:
    """The YAML text of a spec holding `campaigns`."""
    return yaml.safe_dump({"campaigns": _plain(list(campaigns))}, sort_keys=False, allow_unicode=True)


def write_spec(path: Path, *campaigns: Mapping[str, Any]) -> Path:
    """Write a spec holding `campaigns` to `path` (a folder: its campaigns.yaml); return the file."""
    if path.is_dir():
        path = path / "campaigns.yaml"
    path.write_text(spec_yaml(*campaigns), encoding="utf-8")
    return path


def head_tsv(src: Path, dst: Path, rows: int) -> Path:
    """`dst`: the header and first `rows` rows of the TSV `src` (a small campaign over part of the demo)."""
    lines = src.read_text(encoding="utf-8").splitlines()
    dst.write_text("\n".join(lines[: rows + 1]) + "\n", encoding="utf-8")
    return dst


def first_propositions(folder: Path, n: int) -> Path:
    """The first `n` demo propositions, as `folder`/props.tsv."""
    return head_tsv(WATER / "propositions.tsv", folder / "props.tsv", n)


# Spec validation tests work on the spec's text itself (its line numbers are part of what they check).
# VALID_HEAD: the first lines of their valid spec (a Likert campaign "demo" over props.tsv), to go on from.
VALID_HEAD = """\
campaigns:
  - name: demo
    topic: A topic
    input:
      propositions: props.tsv
    task:
      kind: likert
"""


def write_spec_text(folder: Path, text: str) -> Path:
    """`text` as `folder`/campaigns.yaml, beside a two-row props.tsv the text may name."""
    (folder / "props.tsv").write_text("id\ttext\na\tFirst\nb\tSecond\n", encoding="utf-8")
    p = folder / "campaigns.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def spec_problems(folder: Path, text: str) -> list[str]:
    """The problems `load_spec` reports for `text` (it must refuse it)."""
    with pytest.raises(SpecError) as exc:
        load_spec(write_spec_text(folder, text))
    return exc.value.problems


def run_in_process(folder: Path, *campaigns: Mapping[str, Any], seed: int, max_seconds: float) -> tuple[int, Path]:
    """Write `campaigns` to `folder`/campaigns.yaml and run them with the daemon in this process (a kind or stage
    type registered by the test is known there); (its exit code, the state folder)."""
    from campaign.daemon import RunOptions, run

    state = folder / "state"
    return run(load_spec(write_spec(folder / "campaigns.yaml", *campaigns)), RunOptions(state_dir=state, seed=seed,
                                                                                         max_seconds=max_seconds)), state
