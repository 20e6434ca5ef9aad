"""Ferramentas dos testes do JupyterHub da turma: um hub de verdade (``hub/jupyterhub_config.py``)
com usuários Unix de verdade, portas livres e uma pasta de estado temporária."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from browser_helpers import BIN, ROOT, free_port

HUB_DIR = ROOT / "hub"
sys.path.insert(0, str(HUB_DIR))

import preparar  # noqa: E402


def test_names() -> dict[str, str]:
    """Nomes Unix únicos para um teste (papel de cada um): um professor e cinco alunos."""
    tag = secrets.token_hex(2)
    return {
        f"tdzprof{tag}": "professor",
        f"tdzana{tag}": "aluno",
        f"tdzbeto{tag}": "aluno",
        f"tdzcaio{tag}": "aluno",
        f"tdzdora{tag}": "aluno",
        f"tdzeva{tag}": "aluno",
    }


def remove_users(names) -> None:
    for name in names:
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        subprocess.run(["pkill", "-KILL", "-u", name], check=False)
        subprocess.run(["userdel", name], check=False, capture_output=True)
        subprocess.run(["groupdel", name], check=False, capture_output=True)


class Hub:
    """``jupyterhub -f hub/jupyterhub_config.py`` em 127.0.0.1, portas livres, estado temporário."""

    def __init__(self, estado: Path, log_path: Path, modo: str = "local"):
        self.estado = estado
        self.modo = modo
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def env(self) -> dict:
        return {
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "TDZ_HUB_ESTADO": str(self.estado),
            "TDZ_HUB_MODO": self.modo,
            "TDZ_HUB_PORTA": str(self.port),
            "TDZ_HUB_PORTA_API": str(free_port()),
            "TDZ_HUB_PORTA_PROXY": str(free_port()),
        }

    def start(self, timeout: float = 90) -> Hub:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [str(BIN / "jupyterhub"), "-f", str(HUB_DIR / "jupyterhub_config.py")],
            cwd=self.estado / "hub",
            env=self.env(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"o JupyterHub terminou ao iniciar:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.base + "/hub/api/", timeout=5) as response:
                    json.loads(response.read())
                return self
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.5)
        raise RuntimeError(f"o JupyterHub não respondeu em {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM ao grupo do hub (ele encerra os servidores dos usuários), depois SIGKILL."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(timeout=10)
        finally:
            self._log.close()


def as_user(name: str, cmd: list[str], cwd: Path, estado: Path, **kwargs) -> subprocess.CompletedProcess:
    return preparar.como_usuario(name, cmd, cwd, "local", estado, **kwargs)


def nbgrader_as(name: str, args: list[str], cwd: Path, estado: Path) -> subprocess.CompletedProcess:
    return as_user(name, [str(preparar.bin_dos_usuarios(estado, "local") / "nbgrader"), *args], cwd, estado)


def user_can_read(name: str, path: Path, estado: Path) -> bool:
    """O usuário consegue listar (pasta) ou ler (arquivo) ``path``? Pergunta ao sistema, como ele."""
    code = (
        "import os, sys; p = sys.argv[1]\n"
        "try:\n"
        "    os.listdir(p) if os.path.isdir(p) else open(p, 'rb').read(1)\n"
        "except PermissionError:\n"
        "    sys.exit(3)\n"
    )
    python = preparar.bin_dos_usuarios(estado, "local") / "python"
    r = as_user(name, [str(python), "-c", code, str(path)], Path("/"), estado)
    if r.returncode not in (0, 3):
        raise AssertionError(f"não deu para testar a leitura de {path} como {name}: {r.stderr}")
    return r.returncode == 0


def home(name: str) -> Path:
    return Path(pwd.getpwnam(name).pw_dir)


def copy_as_owner(src: Path, dest: Path, owner: str) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dest)
    info = pwd.getpwnam(owner)
    os.chown(dest, info.pw_uid, info.pw_gid)
