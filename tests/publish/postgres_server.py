"""A throw-away Postgres server with pgvector for tests and benchmarks: ``initdb`` + ``pg_ctl``
in a temporary folder, listening on 127.0.0.1 at a free port (no Unix socket outside it).

The binaries are found without naming a major version: ``KB_RAY_PG_BINDIR``, else the newest
``/usr/lib/postgresql/NN/bin`` (Debian's layout) whose server has the ``vector`` extension,
else ``pg_config --bindir`` on PATH. As root the server runs as the ``postgres`` user (initdb
refuses root). ``find_postgres`` says why nothing usable was found (tests skip with it, or
fail where ``KB_RAY_REQUIRE_POSTGRES=1``, as ``.ci/run`` sets).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

DEBIAN_ROOT = Path("/usr/lib/postgresql")


@dataclass(frozen=True)
class PostgresBinaries:
    bindir: Path
    sharedir: Path

    @property
    def has_vector(self) -> bool:
        return (self.sharedir / "extension" / "vector.control").is_file()


def find_postgres() -> tuple[PostgresBinaries | None, str]:
    """(binaries with pgvector, "") or (None, why not)."""
    candidates = [Path(os.environ["KB_RAY_PG_BINDIR"])] if os.environ.get("KB_RAY_PG_BINDIR") else []
    if DEBIAN_ROOT.is_dir():
        versions = sorted((p for p in DEBIAN_ROOT.iterdir() if p.name.isdigit()), key=lambda p: int(p.name),
                          reverse=True)
        candidates += [p / "bin" for p in versions]
    on_path = shutil.which("pg_config")
    if on_path:
        found = subprocess.run([on_path, "--bindir"], capture_output=True, text=True).stdout.strip()
        candidates.append(Path(found))
    seen = []
    for bindir in candidates:
        if not (bindir / "initdb").is_file() or not (bindir / "pg_ctl").is_file():
            continue
        binaries = PostgresBinaries(bindir, _sharedir(bindir))
        seen.append(str(bindir))
        if binaries.has_vector:
            return binaries, ""
    if seen:
        return None, (f"Postgres found ({', '.join(seen)}) but without the pgvector extension: install "
                      "postgresql-NN-pgvector (tests/publish/install_postgres.sh)")
    return None, "no Postgres server binaries (initdb, pg_ctl): apt-get install postgresql postgresql-NN-pgvector"


def _sharedir(bindir: Path) -> Path:
    pg_config = bindir / "pg_config"
    if pg_config.is_file():
        out = subprocess.run([str(pg_config), "--sharedir"], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip())
    return Path("/usr/share/postgresql") / bindir.parent.name  # Debian's layout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalPostgres:
    """``start()`` → ``dsn``; ``stop()`` removes the data folder."""

    def __init__(self, binaries: PostgresBinaries) -> None:
        self.binaries = binaries
        self.folder = Path(tempfile.mkdtemp(prefix="kb_ray_pg_"))
        self.port = free_port()
        self.user = "postgres"
        self._run_as = "postgres" if os.geteuid() == 0 else None
        if self._run_as is None:
            self.user = pwd.getpwuid(os.geteuid()).pw_name

    @property
    def dsn(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    def start(self) -> LocalPostgres:
        if self._run_as:
            account = pwd.getpwnam(self._run_as)
            os.chown(self.folder, account.pw_uid, account.pw_gid)
        data, log = self.folder / "data", self.folder / "server.log"
        self._pg("initdb", "-D", str(data), "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-sync")
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c shared_buffers=128MB "
                   "-c maintenance_work_mem=256MB -c max_parallel_maintenance_workers=0")
        self._pg("pg_ctl", "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start")
        return self

    def stop(self) -> None:
        try:
            self._pg("pg_ctl", "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _pg(self, program: str, *args: str) -> None:
        command = [str(self.binaries.bindir / program), *args]
        if self._run_as:
            command = ["runuser", "-u", self._run_as, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.folder)
        if done.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr or done.stdout}\n{tail}")
