"""The command line as a new user meets it: help that lists everything, options that explain themselves,
clear errors, and read-only commands that leave an empty folder empty."""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from campaign.cli import BENCHES, MARKET_COMMANDS
from campaign.commands import build_parser
from campaign.store import CampaignRow, Store, WorkerRow
from tests.support.cli import clean_env, cli_output, run_campaign
from tests.support.paths import ROOT

COMMANDS = ("run", "validate", "status", "export", "report", "pause", "resume", "cancel", "extend", "workers",
            "events", "market", "bench")
READ_OR_CHANGE = (("status",), ("status", "--json"), ("workers", "x"), ("events", "x"), ("export", "x"),
                  ("report", "x"), ("pause", "x"), ("resume", "x"), ("cancel", "x"), ("extend", "x", "--hours", "1"))


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`campaign ARGS` in a process of its own, as a user at a terminal 100 columns wide starts it."""
    return run_campaign(*args, cwd=cwd, env=clean_env(COLUMNS="100"), timeout=60)


@pytest.mark.slow
def test_top_level_help_and_unknown_command_list_every_command():
    out = cli("--help")
    assert out.returncode == 0
    for name in COMMANDS:
        assert f"\n    {name} " in out.stdout, name
    bad = cli("frobnicate")
    assert bad.returncode == 2
    for name in COMMANDS:
        assert f"'{name}'" in bad.stderr, name


@pytest.mark.slow
def test_bench_and_market_help_list_their_subcommands_with_descriptions():
    bench = cli("bench", "--help")
    assert bench.returncode == 0
    for name, text in BENCHES.items():
        assert name in bench.stdout
        assert " ".join(text.split()[:3]) in " ".join(bench.stdout.split()), name
    market = cli("market", "--help")
    assert market.returncode == 0
    for name in MARKET_COMMANDS:
        assert f"\n    {name} " in market.stdout
    assert "marketplace" in market.stdout


@pytest.mark.slow
def test_market_and_bench_arguments_reach_their_own_parsers():
    serve = cli("market", "serve", "--help")
    assert serve.returncode == 0 and "--port" in serve.stdout and "--throttle-rate" in serve.stdout
    bench = cli("bench", "nuggets", "--no-such-flag")
    assert bench.returncode == 2 and "campaign bench nuggets" in bench.stderr and "--no-such-flag" in bench.stderr
    missing = cli("bench", "nosuch")
    assert missing.returncode == 2 and "'ranking'" in missing.stderr


def test_version():
    import tomllib

    from campaign import __version__

    out = cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"campaign {__version__}"
    assert tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"] == __version__


def _walk(parser: argparse.ArgumentParser, prog: str = "campaign"):
    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sp in action.choices.items():
                yield from _walk(sp, f"{prog} {name}")


def test_every_option_has_help_and_shows_its_default():
    checked = 0
    for prog, parser in _walk(build_parser()):
        text = parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction | argparse._HelpAction | argparse._VersionAction):
                continue
            if action.help == argparse.SUPPRESS:
                continue
            assert action.help, f"{prog} {action.option_strings or action.dest} has no help text"
            checked += 1
            default = action.default
            if default in (None, False, [], argparse.SUPPRESS) and not isinstance(default, int | float) or default is False:
                continue
            shown = " ".join(text.split())
            # shown by the formatter, or said in words by the help text itself ("its worker count (default)")
            assert f"(default: {default})" in shown or "default" in action.help, \
                f"{prog} {action.dest}: default {default!r} not shown"
    assert checked >= 30


@pytest.mark.slow
def test_validate_without_a_file_reads_campaigns_yaml_here_or_says_how_to_name_one(tmp_path):
    here = cli("validate")
    assert here.returncode == 0, here.stderr
    assert "campaigns.yaml: campaign water-bottles" in here.stdout and here.stdout.strip().endswith("ok")
    empty = cli("validate", cwd=tmp_path)
    assert empty.returncode == 2
    assert "campaign validate FILE" in empty.stderr and "--config" not in empty.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", READ_OR_CHANGE, ids=lambda a: " ".join(a))
def test_commands_on_an_empty_folder_create_nothing(tmp_path, args):
    out = cli_output(*args, cwd=tmp_path, COLUMNS="100")
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"no campaign store at {Path('state') / 'campaign.db'}" in out.stderr
    assert "Traceback" not in out.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["workers", "events", "export", "report", "pause"])
def test_unknown_campaign_exits_2_with_a_clear_message(tmp_path, command):
    store = Store.open(tmp_path / "state")
    with store.session() as s:
        s.add(CampaignRow(name="real", fingerprint="f", spec_json='{"stages": [{"name": "likert", "kind": "likert"}]}'))
    store.close()
    out = cli_output(command, "nope", "--state", str(tmp_path / "state"), COLUMNS="100")
    assert out.returncode == 2
    assert "no campaign named 'nope'" in out.stderr
    assert not (tmp_path / "state" / "nope").exists()


def test_plain_progress_ends_with_what_status_says(tmp_path):
    """The last line printed for a campaign comes from its final figures, even inside the print interval."""
    from campaign.progress import PlainProgress
    from campaign.readmodel.figures import campaign_figures

    store = Store.open(tmp_path)
    with store.session() as s:
        s.add(CampaignRow(name="c", fingerprint="f", spec_json='{"stages": []}', budget="5.00"))
    rt = SimpleNamespace(store=store, contexts=[SimpleNamespace(name="c")])
    buf = io.StringIO()
    progress = PlainProgress(buf, every=3600)
    progress(rt)
    with store.session() as s:
        row = s.get(CampaignRow, "c")
        row.status = "finished"
        s.add(row)
    progress(rt)
    progress(rt)
    progress.close()
    lines = buf.getvalue().splitlines()
    assert lines[-1].startswith("c: finished;")
    assert campaign_figures(store, "c")["status"] == "finished"
    assert len(lines) == 2  # no repeats: one line when it started, one when it finished
    store.close()


def _readme_rows() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text[text.index("| command | what it does |"):]
    table = table[:table.index("\n\n")]
    return [re.split(r"(?<!\\)\|", line)[1] for line in table.splitlines()[2:]]


def test_readme_command_table_matches_the_program():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    documented: dict[str, set[str]] = {}
    for cell in _readme_rows():
        for usage in re.findall(r"`campaign ([^`]*)`", cell) + re.findall(r"` / `(\w+) NAME`", cell):
            name = usage.split()[0]
            documented.setdefault(name, set()).update(re.findall(r"--[a-z][a-z-]*", usage))
    for extra in re.findall(r"` / `(\w+) NAME`", "\n".join(_readme_rows())):
        documented.setdefault(extra, set())
    assert set(documented) == set(sub.choices), "README's command table and the program list different commands"
    for name, flags in documented.items():
        if name in ("market", "bench"):
            continue  # their options belong to the program each subcommand hands its arguments to
        parsers = [p for _, p in _walk(sub.choices[name])]
        own = {s for p in parsers for a in p._actions for s in a.option_strings
               if s.startswith("--") and a.help != argparse.SUPPRESS} - {"--help"}
        assert flags <= own, f"README documents {flags - own} for `campaign {name}`, which has no such option"
        if len(parsers) == 1:  # a command without subcommands: its row names every option
            missing = own - flags - {"--state", "--db"}
            assert not missing, f"README's `campaign {name}` row misses {missing}"
    assert set(MARKET_COMMANDS) <= {u.split()[1] for u in re.findall(r"`campaign (market [^`]*)`", "\n".join(_readme_rows()))}
    bench_row = next(u for u in re.findall(r"`campaign (bench [^`]*)`", "\n".join(_readme_rows())))
    assert set(bench_row.split()[1].replace("\\", "").split("|")) == set(BENCHES)


def test_readme_quick_start_makes_a_virtual_environment():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = text[text.index("## Quick start"):text.index("## Commands")]
    assert "python3 -m venv .venv && . .venv/bin/activate" in quick
    assert quick.index("venv") < quick.index("pip install")


def test_workers_is_readable_at_80_columns(tmp_path):
    store = Store.open(tmp_path / "state")
    reason = "ratings unrelated to other workers' (r=-0.28 over 10 items, 3.9 SE below the crowd's median r=0.83)"
    with store.session() as s:
        s.add(CampaignRow(name="c", fingerprint="f", spec_json='{"stages": [{"name": "likert", "kind": "likert"}]}'))
        s.add(WorkerRow(campaign="c", worker_id="ABLB7Y15AOHPWB", assignments=6, excluded=True, reason=reason,
                        evidence=json.dumps({"correlation": -0.2827, "labels": 10, "shared_items": 10, "traps_passed": 0,
                                              "traps_seen": 0})))
        s.add(WorkerRow(campaign="c", worker_id="A1IHTPY6L94GOD", assignments=5,
                        evidence=json.dumps({"correlation": 0.88, "labels": 15, "shared_items": 15, "traps_passed": 1,
                                              "traps_seen": 1})))
    store.close()
    out = cli_output("workers", "c", "--state", str(tmp_path / "state"), COLUMNS="80")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in out.stdout
    for cell in ("ABLB7Y15AOHPWB", "A1IHTPY6L94GOD", "-0.28", "0.88", "1/1", "excluded"):
        assert cell in out.stdout, cell
    assert reason in " ".join(line.strip() for line in lines)  # the reason in full, wrapped



def test_workers_of_a_campaign_nobody_has_answered_says_so(tmp_path):
    store = Store.open(tmp_path / "state")
    with store.session() as s:
        s.add(CampaignRow(name="c", fingerprint="f", spec_json='{"stages": [{"name": "likert", "kind": "likert"}]}'))
    store.close()
    out = cli_output("workers", "c", "--state", str(tmp_path / "state"))
    assert out.returncode == 0 and out.stdout == "no worker has answered c yet\n", out.stdout
    out = cli_output("workers", "c", "--json", "--state", str(tmp_path / "state"))
    assert json.loads(out.stdout) == []
    out = cli_output("export", "c", "--state", str(tmp_path / "state"))  # the header for scripts, a word for people
    assert out.returncode == 0 and out.stdout.startswith("rank,item,score") and out.stdout.count("\n") == 1
    assert out.stderr == "campaign export: c has no scored item yet\n"

@pytest.mark.slow
def test_read_only_commands_with_a_db_url_create_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    for args in (("status",), ("workers", "x"), ("report", "x")):
        out = cli(*args, "--db", url, cwd=tmp_path)
        assert out.returncode == 2 and "no campaign store at" in out.stderr and "elsewhere.db" in out.stderr, out.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [["market", "serve", "--port", "0", "--state"], ["prolific", "serve", "--port", "0", "--state"],
                                  ["preview", "--config", str(ROOT / "campaigns.yaml"), "--out"]])
def test_a_folder_that_cannot_be_made_is_one_line_naming_it(tmp_path, args):
    """Before: a --state or --out under a file (or in a folder that does not exist, or is not the user's)
    ended in a FileNotFoundError or NotADirectoryError traceback."""
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    (tmp_path / "a-file").chmod(0o644)
    bad = tmp_path / "a-file" / "state"
    out = cli_output(*args, str(bad))
    assert out.returncode == 2
    assert out.stderr.strip() == f"campaign: {bad}: Not a directory", out.stderr
    out = cli_output(*args, str(tmp_path / "a-file"))  # the file itself: refused, and left as it was
    assert out.returncode == 2 and out.stderr.strip() in (f"campaign: {tmp_path / 'a-file'}: Not a directory",
                                                          f"campaign: {tmp_path / 'a-file'}: a file is there, not a folder"), out.stderr
    assert (tmp_path / "a-file").read_text(encoding="utf-8") == "x" and (tmp_path / "a-file").stat().st_mode & 0o777 == 0o644


def test_run_refuses_a_state_folder_it_cannot_make_before_printing_the_estimate(tmp_path):
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    out = cli_output("run", "--config", str(ROOT / "campaigns.yaml"), "--state", str(tmp_path / "a-file" / "state"))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == f"campaign run: --state {tmp_path / 'a-file' / 'state'}: {tmp_path / 'a-file'} is a file, not a folder"
    assert (tmp_path / "a-file").read_text(encoding="utf-8") == "x"



def test_events_filter_by_level_and_kind_before_the_limit(tmp_path):
    store = Store.open(tmp_path / "state")
    with store.session() as s:
        s.add(CampaignRow(name="c", fingerprint="f", spec_json='{"stages": [{"name": "likert", "kind": "likert"}]}'))
    store.event("c", "alert", "an old warning", level="warning")
    for k in range(30):
        store.event("c", "posted", f"routine {k}")
    store.event("c", "worker_excluded", "W1 excluded")
    store.event("c", "step_error", "a failure", level="error")
    store.close()
    state = str(tmp_path / "state")
    out = cli_output("events", "c", "--level", "warning", "--limit", "5", "--state", state)
    lines = out.stdout.splitlines()  # the last 5 of those asked for: the old warning is not crowded out
    assert out.returncode == 0 and len(lines) == 2 and "an old warning" in lines[0] and "a failure" in lines[1]
    out = cli_output("events", "c", "--level", "error", "--json", "--state", state)
    assert [e["message"] for e in json.loads(out.stdout)] == ["a failure"]
    out = cli_output("events", "c", "--kind", "worker_excluded", "--kind", "alert", "--state", state)
    assert [line.split()[3] for line in out.stdout.splitlines()] == ["alert", "worker_excluded"]


def test_status_and_workers_show_stored_text_inert(tmp_path):
    """Event messages and reasons can quote what people sent: `campaign status` printed an escape sequence
    from one raw (`\\x1b[2J` cleared the operator's screen). Line breaks in a table cell stay."""
    from campaign.untrusted import for_rich, inert

    store = Store.open(tmp_path / "state")
    with store.session() as s:
        s.add(CampaignRow(name="c", fingerprint="f", budget="5.00", spec_json='{"stages": [{"name": "likert", "kind": "likert"}]}'))
        s.add(WorkerRow(campaign="c", worker_id="AW1", assignments=1, excluded=True, reason="said \x1b[31mred\x1b[0m",
                        evidence=json.dumps({"correlation": 0.1, "labels": 5, "shared_items": 5, "traps_passed": 0, "traps_seen": 0})))
    store.event("c", "collect_error", "answer from AW1: \x1b[2J\x1b[31mEVIL\x9b31m")
    store.close()
    for args in (("status",), ("workers", "c")):
        out = cli_output(*args, "--state", str(tmp_path / "state"), COLUMNS="200")
        assert out.returncode == 0, out.stderr
        assert "\x1b" not in out.stdout and "\x9b" not in out.stdout, args
    assert "\\x1b[2J" in cli_output("status", "--state", str(tmp_path / "state"), COLUMNS="200").stdout
    assert for_rich("a\nb [bold]x[/bold]") == "a\nb \\[bold]x\\[/bold]" and inert("a\nb") == "a\\nb"
