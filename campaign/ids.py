"""Where the built-in marketplace and the Prolific emulator take their new ids from.

Facing people, an id comes from the OS's random source. In a simulated run on virtual time it comes
from the run's seed instead: ids decide orders (who is listed first, which row sorts first), so random
ids would let two runs of one seed differ. A simulation installs a `SeededIds` for its process while it
runs (`simulated_ids`); it is the process's only run then, and every id is drawn on the timeline's
one thread in the timeline's order, so the sequence is the seed's.

Each scope (what an id belongs to: a HIT type's HITs, a HIT's assignments, the Prolific emulator) has its
own stream, so a campaign's ids do not depend on the other campaigns of its run (`random_bytes`). The
streams are keyed by the seed and by how many times this state folder has started a run (`epoch`), so a
resumed run never draws an id an earlier run of the same folder drew.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_lock = threading.Lock()
_source: SeededIds | None = None


class SeededIds:
    """One numbered stream of ids per scope (see `random_bytes`)."""

    def __init__(self, seed: int, epoch: int) -> None:
        self.key = f"{seed}:{epoch}"
        self.n = 0  # the unscoped stream
        self.scoped: dict[str, int] = {}

    def draw(self, nbytes: int, scope: str = "") -> bytes:
        if scope:
            n = self.scoped[scope] = self.scoped.get(scope, 0) + 1
            label = f"{self.key}:{scope}:{n}"
        else:
            self.n += 1
            label = f"{self.key}:{self.n}"
        out = b""
        block = 0
        while len(out) < nbytes:
            out += hashlib.sha256(f"{label}:{block}".encode()).digest()
            block += 1
        return out[:nbytes]


def random_bytes(nbytes: int, scope: str = "") -> bytes:
    """`nbytes` bytes for a new id: the installed simulation's, else the OS's random source.

    `scope` names what the id belongs to (a HIT type for a HIT's id, a HIT for an assignment's, the
    Prolific emulator for its own): in a simulation each scope has its own numbered stream, so a
    campaign's ids depend on its own history only. With one stream for the whole process, a campaign run
    beside others (`campaign run` of a spec with several campaigns) drew other ids than the same
    campaign run alone, and since ids decide orders (who is offered which HIT first, ties in review),
    its results depended on which campaigns shared its run. Facing people the scope changes nothing."""
    with _lock:
        if _source is not None:
            return _source.draw(nbytes, scope)
    return secrets.token_bytes(nbytes)


def next_epoch(state_dir: Path) -> int:
    """How many runs this state folder has started before (and count this one)."""
    f = state_dir / "id-epoch.json"
    epoch = int(json.loads(f.read_text()).get("epoch", 0)) + 1 if f.is_file() else 0
    state_dir.mkdir(parents=True, exist_ok=True)
    tmp = f.with_name(f"id-epoch.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"epoch": epoch}))
    os.replace(tmp, f)
    return epoch


def install(seed: int, epoch: int) -> None:
    global _source
    with _lock:
        _source = SeededIds(seed, epoch)


def uninstall() -> None:
    global _source
    with _lock:
        _source = None


@contextmanager
def simulated_ids(seed: int, state_dir: Path) -> Iterator[None]:
    install(seed, next_epoch(state_dir))
    try:
        yield
    finally:
        uninstall()
