"""A throw-away PostgreSQL server: `initdb` into a temporary folder, started on a free loopback port.

Used by `campaign bench scale --db postgres` (the bench needs a server the way the tests do, and the
bench ships in the package) and by the tests' fixtures (tests/pg.py re-exports it). With `preload=True`
the server loads `pg_stat_statements` (shared_preload_libraries), when this installation has the
extension, so the bench can report the slowest statements.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


def find_bindir() -> Path | None:
    """The newest installed server's bin folder (Debian keeps them under /usr/lib/postgresql/N/bin)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name)
                   if Path(p).parent.parent.name.isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def has_pg_stat_statements(bindir: Path) -> bool:
    """Whether the server installed beside `bindir` ships pg_stat_statements (Debian: in the server package)."""
    try:
        out = subprocess.run([str(bindir / "pg_config"), "--sharedir"], capture_output=True, text=True, timeout=30)
        share = Path(out.stdout.strip()) if out.returncode == 0 else None
    except OSError:
        share = None
    candidates = [share] if share else []
    candidates += [Path(p) for p in glob.glob(f"/usr/share/postgresql/{bindir.parent.name}")]
    return any((c / "extension" / "pg_stat_statements.control").is_file() for c in candidates)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class PgServer:
    port: int
    user: str = "postgres"
    data_dir: Path | None = None  # the cluster's folder (its postmaster.pid names the server's process)
    stat_statements: bool = False  # pg_stat_statements is preloaded

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(host="127.0.0.1", port=self.port, user=self.user, dbname="postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def postmaster_pid(self) -> int | None:
        """The server's main process (its backends are its children), read from postmaster.pid."""
        if self.data_dir is None:
            return None
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None


@contextmanager
def pg_server(preload: bool = False) -> Iterator[PgServer]:
    """Start a server in a temporary folder and stop it (and delete the folder) afterwards.

    initdb refuses to run as root, so as root the server runs as the `postgres` system user, with its
    folder handed over to it. `preload`: load pg_stat_statements where the installation has it.
    """
    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) not found; install the postgresql package")
    tmp = Path(tempfile.mkdtemp(prefix="campaign-pg-"))
    data, sock, logfile = tmp / "data", tmp / "sock", tmp / "server.log"
    sock.mkdir()
    prefix: list[str] = []
    if os.geteuid() == 0:
        prefix = ["runuser", "-u", "postgres", "--"]
        os.chmod(tmp, 0o755)
        shutil.chown(tmp, "postgres")
        shutil.chown(sock, "postgres")
    port = _free_port()

    def run(*args: str) -> None:
        proc = subprocess.run(prefix + list(args), capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            log = logfile.read_text(errors="replace") if logfile.exists() else ""
            raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}\n{log}")

    stats = preload and has_pg_stat_statements(bindir)
    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
        options = f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        if stats:
            options += " -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
        run(str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(logfile), "-w", "-t", "60", "start")
        try:
            yield PgServer(port=port, data_dir=data, stat_statements=stats)
        finally:
            run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
