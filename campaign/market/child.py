"""The built-in marketplace of `campaign run` in a child process of the daemon.

The daemon and the marketplace it started were one Python process: every request the daemon and the
simulated crowd made was served on threads that took turns with the daemon's own work under one GIL,
so at the seed's scale (9,400 HITs, about 250,000 requests) one core did both while the other core
idled but for the crowd. Here the marketplace runs beside the daemon as its own process: the same
server (`start_market`), the same folder, the same account and the same simulated clock
(`ScaledClock.shared`, read from the machine's monotonic clock in both processes), so nothing the
daemon or a worker sees changes but the process serving it.

The child prints one JSON line with its addresses when it listens and serves until SIGTERM. It dies
with the daemon (PR_SET_PDEATHSIG, and a check of its parent every half second), as the in-process
marketplace did: a marketplace left behind by a killed daemon must not take work for the next one.
The requester credentials are not sent over the pipe: the parent reads them from the marketplace's
folder, where they live anyway.

The Prolific door is mounted on the marketplace's worker site in the daemon's process, so runs with a
Prolific campaign keep the marketplace in-process (`campaign.daemon.start_runtime` decides).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from campaign.child_process import begin, end, first_line, spawn, wait_for_stop
from campaign.credentials import Credentials
from campaign.market.accounts import DEFAULT_ACCOUNT, Accounts
from campaign.market.operator import offline, register_in_process, unregister_in_process

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MarketConfig:
    state_dir: Path
    clock: dict[str, float] | None  # `ScaledClock.shared()`; None: the wall clock
    balance: Decimal
    port: int
    content_port: int
    public_url: str | None
    parent: int  # the daemon's pid


class MarketStartError(RuntimeError):
    """The child did not come up; `errno_text` carries the reason when it could not listen."""


class MarketProcess:
    """The daemon's handle on its marketplace's child process, with what the daemon reads of a running
    marketplace (`endpoint_url`, `content_url`, `port`, `credentials`); `stop()` ends it.

    While it runs, an operator on the marketplace's folder is registered for its URL in this process,
    so a worker client here can sign workers up exactly as with an in-process marketplace.

    A child that exits when nobody stopped it (killed by the OOM killer, a crash) is started again on
    the same two ports, with `RESTART_DELAYS` between attempts while they fail (a port taken meanwhile):
    the daemon's clients, the crowd and the workers' pages hold its addresses, and its state is its
    folder's database, where every request is one transaction, so nothing is lost but the requests in
    flight, which their clients retry. `restarts` counts the times it came back; `on_restart`, if set,
    is told of each exit in words (the daemon writes it to its campaigns' events), else it is logged."""

    RESTART_DELAYS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)  # seconds between attempts; the last one repeats
    SHORT_LIFE = 10.0  # a child that dies sooner after its start than this is not started again at once

    def __init__(self, config: MarketConfig, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.restarts = 0
        self.on_restart: Callable[[str], None] | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        ready = self._spawn(config)
        self.endpoint_url: str = ready["endpoint"]
        self.content_url: str = ready["content_url"]
        self.port: int = int(ready["port"])
        accounts = Accounts(config.state_dir)
        try:
            self.credentials: Credentials = accounts.ensure_account(DEFAULT_ACCOUNT)
        finally:
            accounts.close()
        self._operator, self._close_operator = offline(config.state_dir, self.endpoint_url)
        register_in_process(self.endpoint_url, self._operator)
        content_port = urllib.parse.urlsplit(self.content_url).port or 0
        self._again = dataclasses.replace(config, port=self.port, content_port=content_port)
        self._watcher = threading.Thread(target=self._watch, name="market-child-watch", daemon=True)
        self._watcher.start()

    def _spawn(self, config: MarketConfig) -> dict[str, Any]:
        """A child started and listening (`self.proc`), with its addresses; MarketStartError if it is not."""
        proc = spawn("campaign.market.child", config, stderr=subprocess.PIPE)
        assert proc.stdout is not None
        line = first_line(proc.stdout, self.timeout)
        try:
            ready = json.loads(line) if line.strip() else {}
        except json.JSONDecodeError:
            ready = {}
        if not isinstance(ready, dict) or "endpoint" not in ready:
            end(proc)
            err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr is not None else ""
            raise MarketStartError(err.strip().splitlines()[-1] if err.strip() else
                                   f"the marketplace's process did not start (exit {proc.returncode})")
        self.proc = proc
        self._started = time.monotonic()
        threading.Thread(target=self._forward_stderr, args=(proc,), name="market-child-stderr", daemon=True).start()
        return ready

    def _watch(self) -> None:
        """Start the child again each time it exits without `stop()` (class docstring). One that keeps dying
        soon after its start (`SHORT_LIFE`) waits longer each time, as a start that fails does: a crash loop
        is not a busy loop."""
        short = 0
        while True:
            proc = self.proc
            code = proc.wait()
            if self._stopping.is_set():
                return
            if proc.stdout is not None:
                proc.stdout.close()
            short = short + 1 if time.monotonic() - self._started < self.SHORT_LIFE else 0
            self._tell(f"the built-in marketplace's process exited ({f'signal {-code}' if code < 0 else f'exit {code}'}) "
                       f"while the run needed it: starting it again on {self.endpoint_url}")
            if short > 1 and self._stopping.wait(self.RESTART_DELAYS[min(short - 2, len(self.RESTART_DELAYS) - 1)]):
                return
            attempt = 0
            while not self._stopping.is_set():
                with self._lock:
                    if self._stopping.is_set():
                        return
                    try:
                        self._spawn(self._again)
                    except Exception as exc:  # noqa: BLE001 - a port still taken, no process to spawn: try again
                        delay = self.RESTART_DELAYS[min(attempt, len(self.RESTART_DELAYS) - 1)]
                        log.warning("the built-in marketplace did not start again (%s): next try in %g s", exc, delay)
                    else:
                        self.restarts += 1
                        break
                attempt += 1
                self._stopping.wait(delay)

    def _tell(self, message: str) -> None:
        if self.on_restart is None:
            log.warning("%s", message)
            return
        try:
            self.on_restart(message)
        except Exception:  # noqa: BLE001 - the store may be unreachable: the log still has it
            log.warning("%s", message)

    def _forward_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        """The child's warnings, on this process's log (its stderr is a pipe so a failed start can be read)."""
        assert proc.stderr is not None
        for raw in proc.stderr:
            text = raw.decode("utf-8", "replace").rstrip()
            if text:
                log.warning("%s", text)

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:  # a restart under way finishes first, and its child is the one ended here
            unregister_in_process(self.endpoint_url)
            end(self.proc)
        self._close_operator()


def main() -> int:
    config: MarketConfig
    config, clock, done = begin("marketplace")
    from campaign.market.server import start_market

    try:
        market: Any = start_market(config.state_dir, clock=clock, mode="prod", balance=config.balance, port=config.port,
                                   public_url=config.public_url, content_port=config.content_port)
    except OSError as exc:
        print(f"cannot listen on 127.0.0.1:{config.port}: {exc.strerror or exc}", file=sys.stderr, flush=True)
        return 1
    try:
        print(json.dumps({"endpoint": market.endpoint_url, "content_url": market.content_url, "port": market.port}),
              flush=True)
        wait_for_stop(done, config.parent)
    finally:
        market.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
