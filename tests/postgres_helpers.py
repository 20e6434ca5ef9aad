"""Um servidor PostgreSQL de verdade para os testes (o ``postgresql`` do Debian), numa pasta temporária.

``initdb`` e ``pg_ctl`` recusam rodar como root: como root, rodam como o usuário ``postgres``
(``runuser``) numa pasta que é dele. O servidor escuta só em 127.0.0.1, numa porta livre, com o
soquete Unix dentro da própria pasta; ``stop()``/``start()`` servem aos testes de falha.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

SKIP_REASON = (
    "PostgreSQL ausente: instale o pacote `postgresql` do Debian (apt-get install postgresql); "
    "o .ci/run já instala"
)


def pg_bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    """``initdb`` + ``pg_ctl`` de verdade; ``url`` é o ``db_url`` para o nbgrader (psycopg 3)."""

    def __init__(self, bindir: Path, database: str = "notas"):
        self.bindir = bindir
        self.port = free_port()
        self.database = database
        self.folder = Path(tempfile.mkdtemp(prefix="tdz-postgres-"))
        self.data = self.folder / "dados"
        self.log = self.folder / "servidor.log"
        self.as_root = os.geteuid() == 0
        if self.as_root:
            os.chmod(self.folder, 0o755)
            shutil.chown(self.folder, "postgres", "postgres")
        self.user = "postgres" if self.as_root else os.environ.get("USER", "postgres")
        self._run(
            "initdb", "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-locale"
        )
        self.start()
        import psycopg

        with psycopg.connect(self.admin_dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}"')

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.database}"

    @property
    def sqlalchemy_url(self) -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def admin_dsn(self, database: str | None = None) -> str:
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname={database or self.database}"

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(self.bindir / tool), *args]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=self.folder)
        if check and run.returncode != 0:
            raise RuntimeError(f"{tool} falhou: {run.stdout}\n{run.stderr}")
        return run

    def start(self) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder} -c max_connections=200"
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start"
        )

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop", check=False)

    def query(self, sql: str) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.admin_dsn(), autocommit=True) as conn:
            return conn.execute(sql).fetchall()

    def close(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)


def start_postgres(database: str = "notas") -> PostgresServer:
    """Inicia um PostgreSQL novo, ou pula o teste com o motivo em pt-BR."""
    bindir = pg_bindir()
    if bindir is None:
        pytest.skip(SKIP_REASON)
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("falta o usuário `postgres` (vem com o pacote `postgresql` do Debian)")
    deadline = time.monotonic() + 5
    while True:
        try:
            return PostgresServer(bindir, database)
        except RuntimeError:
            # Outra porta, se alguém pegou a livre entre a escolha e o pg_ctl.
            if time.monotonic() > deadline:
                raise
