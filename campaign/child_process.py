"""The plumbing the daemon's helper processes share (`campaign.crowd.child`, `campaign.market.child`).

Each is started with `spawn` (a fresh interpreter running a module, its configuration pickled on
stdin), says one first line on stdout when it is ready, and must never outlive the daemon: a crowd
or marketplace left behind by a SIGKILLed daemon would work for, or take work from, the next one. So
the child asks the kernel for SIGKILL when its parent dies (PR_SET_PDEATHSIG, Linux) and, everywhere,
checks every half second that its parent is still the one that started it.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from campaign.clock import Clock, ScaledClock, WallClock


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the daemon dies (Linux; elsewhere the parent check does it)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def spawn(module: str, config: Any, stderr: int | None = None) -> subprocess.Popen[bytes]:
    """`python -m module` with this checkout on its path and `config` pickled on its stdin."""
    import campaign

    root = str(Path(campaign.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                            env=env, preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    assert proc.stdin is not None
    try:
        proc.stdin.write(pickle.dumps(config))
        proc.stdin.close()
    except BrokenPipeError:  # it died at once; the caller reads why
        pass
    return proc


def first_line(stream: IO[bytes], timeout: float) -> str:
    """The child's first line, or "" if it says nothing for `timeout` seconds (or exits)."""
    got: list[bytes] = []
    t = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    t.start()
    t.join(timeout)
    return got[0].decode("utf-8", "replace") if got else ""


def end(proc: subprocess.Popen[Any], grace: float = 15.0) -> None:
    """SIGTERM, then SIGKILL if it has not stopped within `grace` seconds; its stdout closed."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def begin(label: str) -> tuple[Any, Clock, threading.Event]:
    """In the child, first: warnings on stderr under `label`, the pickled configuration from stdin, the
    daemon's clock (`config.clock`: `ScaledClock.shared()`, or None for the wall clock), and the event
    SIGINT/SIGTERM set (see `wait_for_stop`)."""
    logging.basicConfig(level=logging.WARNING, format=f"{label}: %(levelname)s %(message)s")
    config = pickle.load(sys.stdin.buffer)
    shared = getattr(config, "clock", None)
    clock: Clock = ScaledClock.from_shared(shared) if shared is not None else WallClock()
    return config, clock, stop_signals()


def stop_signals() -> threading.Event:
    """In the child: an event set by SIGINT/SIGTERM, to pass to `wait_for_stop` once ready."""
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    return done


def wait_for_stop(done: threading.Event, parent: int) -> None:
    """Block until told to stop or until the daemon that started this child is gone."""
    while not done.wait(0.5):
        if os.getppid() != parent:
            break


def pool_worker_bound_to(parent: int) -> None:
    """A process pool's initializer (`campaign simulate`'s runs): the worker dies with the process that
    started it. Without it, a `campaign simulate` stopped by SIGTERM (`timeout`, `kill`) left its
    workers running their simulated campaigns at full CPU, orphaned, until each finished its queue."""
    if sys.platform == "linux":
        _die_with_parent()
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(1)

    def watch() -> None:  # where PR_SET_PDEATHSIG is not available
        while os.getppid() == parent:
            threading.Event().wait(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
