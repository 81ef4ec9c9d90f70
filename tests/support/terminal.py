"""Commands on a real pseudo-terminal, as a user at a terminal runs them.

`Term` puts a terminal emulator (pyte) behind the pty: tests read the screen a user would see at a given
size, send keys and resize the window (the kernel sends the program SIGWINCH). `capture_in_pty` keeps
everything a command draws in a time, for output meant to be read as text. Both start the program with
`spawn_in_pty`: the window size is the terminal's own (COLUMNS/LINES are dropped, so a resize counts)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pyte

from tests.support.cli import campaign_cmd
from tests.support.paths import ROOT


def _winsize(cols: int, rows: int) -> bytes:
    return struct.pack("HHHH", rows, cols, 0, 0)


def spawn_in_pty(args: list[str], cols: int, rows: int, cwd: Path = ROOT,
                 env: dict[str, str] | None = None) -> tuple[int, int]:
    """Start `campaign ARGS` on a new pty of `cols` x `rows`; (its pid, the pty's master fd)."""
    pid, fd = pty.fork()
    if pid == 0:  # child: size its terminal, then become the program
        fcntl.ioctl(0, termios.TIOCSWINSZ, _winsize(cols, rows))
        child_env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        child_env.update({"TERM": "xterm-256color", "PYTHONPATH": str(ROOT), **(env or {})})
        os.chdir(cwd)
        argv = campaign_cmd(*args)
        os.execve(argv[0], argv, child_env)
    return pid, fd


def capture_in_pty(args: list[str], seconds: float, cols: int = 200, rows: int = 60) -> str:
    """Run `campaign ARGS` on a pty for up to `seconds` (then SIGINT); everything it drew, escapes removed."""
    pid, fd = spawn_in_pty(args, cols, rows)
    out = b""
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            else:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
    finally:
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        os.close(fd)
    text = out.decode("utf-8", "replace")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


class Term:
    """`campaign ARGS` on a pty of `cols` x `rows`, its screen kept by a terminal emulator."""

    def __init__(self, args: list[str], cols: int, rows: int, cwd: Path = ROOT, env: dict[str, str] | None = None) -> None:
        self.cols, self.rows = cols, rows
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.pid, self.fd = spawn_in_pty(args, cols, rows, cwd, env)
        self.exit_code: int | None = None

    def pump(self, seconds: float = 0.1) -> None:
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            r, _, _ = select.select([self.fd], [], [], max(left, 0))
            if r:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    self._reap()
                    return
                self.stream.feed(chunk)
            elif left <= 0:
                return

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display]

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = 40.0) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.pump(0.2)
            text = self.text()
            if predicate(text):
                return text
            if self.exit_code is not None:
                break
        raise AssertionError(f"screen never matched within {timeout}s; last screen:\n{self.text()}")

    def send(self, keys: str | bytes) -> None:
        os.write(self.fd, keys.encode() if isinstance(keys, str) else keys)

    def resize(self, cols: int, rows: int) -> None:
        self.cols, self.rows = cols, rows
        self.screen.resize(rows, cols)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, _winsize(cols, rows))

    def _reap(self) -> None:
        if self.exit_code is not None:
            return
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            self.exit_code = -1
            return
        if pid:
            self.exit_code = os.waitstatus_to_exitcode(status)

    def wait_exit(self, timeout: float = 60.0) -> int:
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.exit_code is None:
            self.pump(0.1)
            self._reap()
        if self.exit_code is None:
            raise AssertionError("the program did not exit")
        return self.exit_code

    def close(self) -> None:
        if self.exit_code is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        try:
            os.close(self.fd)
        except OSError:
            pass
