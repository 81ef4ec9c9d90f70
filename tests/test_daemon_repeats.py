"""The daemon on a full disk: a pass that keeps failing the same way is reported at the 1st, 2nd, 4th,
8th, ... pass in a row (it was a traceback and an event per pass and campaign, 2.4 a second), the run's
statistics file is skipped rather than stopping the daemon, and the campaigns go on once there is room
(measured by hand on a 4 MB tmpfs: the demo stalled, then finished with the same spend as a clean run
once the tmpfs was enlarged)."""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from types import SimpleNamespace

from campaign.daemon import Repeats, Runtime, _safe, write_run_stats


class _Events:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def event(self, campaign: str, kind: str, message: str, level: str = "info") -> None:
        self.messages.append(message)


def test_the_same_failure_is_reported_at_powers_of_two_and_again_after_a_good_pass(tmp_path: Path, caplog) -> None:
    store = _Events()
    ctx = SimpleNamespace(name="c", store=store, clock=None)
    outcome: list[BaseException | None] = []

    def tick(_ctx: object) -> None:
        exc = outcome.pop(0)
        if exc is not None:
            raise exc

    job = _safe(ctx, tick, tmp_path)  # type: ignore[arg-type]
    full = OSError(errno.ENOSPC, "No space left on device")
    outcome[:] = [full] * 10 + [None, full]
    with caplog.at_level(logging.ERROR, logger="campaign.daemon"):
        for _ in range(12):
            job()
    assert store.messages == ["OSError: [Errno 28] No space left on device",
                              "OSError: [Errno 28] No space left on device (2 passes in a row)",
                              "OSError: [Errno 28] No space left on device (4 passes in a row)",
                              "OSError: [Errno 28] No space left on device (8 passes in a row)",
                              "OSError: [Errno 28] No space left on device"]  # after a good pass: the first again
    assert sum("Traceback" in (r.exc_text or "") or r.exc_info is not None for r in caplog.records) == 2


def test_another_failure_is_reported_at_once() -> None:
    r = Repeats()
    assert r.failed(ValueError("a")) and r.failed(ValueError("a")) and not r.failed(ValueError("a"))
    assert r.failed(KeyError("b")) and r.count == 1


def test_run_statistics_that_cannot_be_written_do_not_stop_the_daemon(tmp_path: Path, caplog) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    rt = Runtime(store=None, clock=None, contexts=[], services=None)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="campaign.daemon"):
        write_run_stats(rt, blocker)  # raised OSError (ENOTDIR here, ENOSPC on a full disk) and ended the run
    assert "run statistics not written" in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-folder"]


def test_a_full_store_at_start_is_one_line_not_a_traceback(monkeypatch, capsys) -> None:
    """`campaign run` on a full disk ended in a traceback (sqlite3.OperationalError from the marketplace's
    or the campaign store's first write); it is one line now, and the next run resumes."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    import campaign.commands
    from campaign.cli import main

    def full(argv: object) -> int:
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.OperationalError as inner:
            raise OperationalError("INSERT INTO events ...", {}, inner) from inner

    monkeypatch.setattr(campaign.commands, "main", full)
    assert main(["status"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("campaign: cannot write: a database's disk is full") and "Traceback" not in err

    def other(argv: object) -> int:
        raise sqlite3.OperationalError("no such table: campaigns")

    monkeypatch.setattr(campaign.commands, "main", other)
    import pytest

    with pytest.raises(sqlite3.OperationalError):  # any other failure is not hidden
        main(["status"])


def test_a_read_only_state_folder_is_one_line(monkeypatch, capsys) -> None:
    """`campaign run --state` on a read-only mount ended in a traceback (EROFS on daemon.lock)."""
    import campaign.commands
    from campaign.cli import main

    def read_only(argv: object) -> int:
        raise OSError(errno.EROFS, "Read-only file system", "/mnt/ro/daemon.lock")

    monkeypatch.setattr(campaign.commands, "main", read_only)
    assert main(["run"]) == 1
    assert capsys.readouterr().err.strip() == "campaign: cannot write /mnt/ro/daemon.lock: Read-only file system"
