"""Issue 25, files: state folders are 0700 and every database (with SQLite's side files) 0600 when made,
and tightened with a warning when found looser. Answers, worker ids, completion codes and Prolific
PID/STUDY/SESSION triples are then readable by their owner only."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from campaign.filemodes import private_db, private_dir
from campaign.market.accounts import Accounts
from campaign.market.db import Database
from campaign.market.engine import Engine
from campaign.market.prolific_site import ProlificDoor
from campaign.market.worker_site import SiteConfig
from campaign.prolific.emulator.store import DocStore
from campaign.store import Store


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.fixture(autouse=True)
def _usual_umask():
    """The umask most systems give users (0022): what made 0644 files before."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def _sqlite_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and any(s in p.name for s in (".db", ".sqlite"))]


def test_every_state_folder_and_database_is_owner_only(tmp_path):
    state = tmp_path / "state"
    store = Store.open(state)
    db = Database(state / "market")
    accounts = Accounts(state / "market")
    accounts.ensure_account("default")
    engine = Engine(db)
    door = ProlificDoor(engine, SiteConfig(), state / "prolific-site", gate_api=None)
    emulator = DocStore(state / "prolific" / "prolific.db")
    with db.transaction() as c:  # writes make the WAL and shared-memory files
        c.execute("SELECT 1")
    try:
        files = _sqlite_files(state)
        names = {p.name for p in files}
        assert {"campaign.db", "market.db", "auth.db", "prolific-site.sqlite", "prolific.db"} <= names
        assert any(n.endswith("-wal") for n in names) and any(n.endswith("-shm") for n in names)
        assert {p.name: oct(_mode(p)) for p in files if _mode(p) != 0o600} == {}
        folders = [state, *[p for p in state.rglob("*") if p.is_dir()]]
        assert {str(p): oct(_mode(p)) for p in folders if _mode(p) != 0o700} == {}
    finally:
        store.close()
        door.close()
        emulator.close()
        accounts.close()
        db.close()


def test_a_looser_folder_database_and_side_file_are_tightened_with_a_warning(tmp_path, caplog):
    folder = tmp_path / "old"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    dbfile = folder / "campaign.db"
    sqlite3.connect(dbfile).close()
    os.chmod(dbfile, 0o644)
    wal = folder / "campaign.db-wal"
    wal.write_bytes(b"")
    os.chmod(wal, 0o644)
    with caplog.at_level(logging.WARNING, logger="campaign.filemodes"):
        Store.open(folder).close()
    assert (_mode(folder), _mode(dbfile)) == (0o700, 0o600)
    assert not wal.exists() or _mode(wal) == 0o600
    assert sum("readable by other local users" in r.getMessage() for r in caplog.records) >= 2


def test_nested_folders_are_all_made_owner_only(tmp_path):
    deep = private_dir(tmp_path / "a" / "b" / "c")
    for p in (tmp_path / "a", tmp_path / "a" / "b", deep):
        assert _mode(p) == 0o700
    assert _mode(private_db(tmp_path / "x" / "y.db")) == 0o600 and _mode(tmp_path / "x") == 0o700


def test_a_shared_sticky_folder_is_never_changed(tmp_path, caplog):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    with caplog.at_level(logging.WARNING, logger="campaign.filemodes"):
        private_dir(shared)
    assert _mode(shared) == 0o1777
    assert any("not ours to change" in r.getMessage() for r in caplog.records)


def test_a_file_where_a_state_folder_should_be_is_refused_not_chmodded(tmp_path):
    """Before: `campaign market serve --state F` on a regular file F made F mode 700 (executable) with a
    warning that it 'was readable by other local users', then failed."""
    f = tmp_path / "notes.txt"
    f.write_text("mine\n", encoding="utf-8")
    os.chmod(f, 0o644)
    with pytest.raises(NotADirectoryError) as caught:
        private_dir(f)
    assert caught.value.filename == str(f)
    assert stat.S_IMODE(f.stat().st_mode) == 0o644 and f.read_text(encoding="utf-8") == "mine\n"
