"""Every option of every `campaign` command says what it does in `--help`: the test walks the whole
argparse tree (sub-commands of sub-commands included) and lists each option or argument without help."""

from __future__ import annotations

import argparse

from campaign.commands import build_parser


def _walk(parser: argparse.ArgumentParser, path: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield path, action


def test_every_option_has_help():
    missing = [f"{path}: {'/'.join(a.option_strings) or a.dest}" for path, a in _walk(build_parser(), "campaign")
               if not a.help]
    assert not missing, "options without help:\n" + "\n".join(missing)


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def _delegated_parsers(monkeypatch) -> list[tuple[str, argparse.ArgumentParser]]:
    """The parsers `campaign market ...` and `campaign bench ...` hand their arguments to, caught as they parse."""
    from campaign import tools_cli

    def capture(self, *args, **kwargs):
        raise _Captured(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
    # `account` and `worker` share one tree (`campaign market account|worker ...`): walked once
    targets = [("campaign market serve", tools_cli.MARKET_COMMANDS["serve"][0]),
               ("campaign market", tools_cli.MARKET_COMMANDS["worker"][0])]
    targets += [(f"campaign bench {name}", f"campaign.bench.{name}:main") for name in tools_cli.BENCHES]
    out = []
    for path, target in targets:
        try:
            tools_cli._call(target, ["--help"])
        except _Captured as got:
            out.append((path, got.parser))
    return out


def test_every_option_of_the_delegated_commands_has_help(monkeypatch):
    parsers = _delegated_parsers(monkeypatch)
    assert {p for p, _ in parsers} >= {"campaign market serve", "campaign market", "campaign bench scale"}
    paths = {path for root, parser in parsers for path, _ in _walk(parser, root)}
    assert "campaign market worker add" in paths
    missing = [f"{path}: {'/'.join(a.option_strings) or a.dest}" for root, parser in parsers for path, a in _walk(parser, root)
               if not a.help]
    assert not missing, "options without help:\n" + "\n".join(missing)
