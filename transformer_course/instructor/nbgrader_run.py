"""Chamar o nbgrader de linha de comando, do jeito certo, num lugar só.

O nbgrader chama ``alembic`` pelo PATH (migrações do gradebook) e o kernel ``python3`` deste
ambiente: o ``bin/`` deste Python vai na frente do PATH. Avisos do Python ficam calados (o
nbgrader zera uma célula que escreve em stderr).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["nbgrader_env", "nbgrader_exe", "run_nbgrader"]


def nbgrader_env(**extra: str) -> dict:
    """Ambiente para chamar o nbgrader: o ``bin/`` deste Python no PATH (por causa do ``alembic``)."""
    env = dict(os.environ)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PYTHONWARNINGS", "ignore")
    env.update(extra)
    return env


def nbgrader_exe() -> str:
    """O executável ``nbgrader`` deste ambiente."""
    return os.path.join(os.path.dirname(sys.executable), "nbgrader")


def run_nbgrader(
    *args: str,
    cwd: Path | str,
    db_url: str | None = None,
    timeout: float | None = 3600,
    env: dict | None = None,
) -> subprocess.CompletedProcess:
    """``nbgrader <args>`` na pasta do curso ``cwd``; saída capturada (texto), sem levantar erro.

    Args:
        db_url: outro banco de notas (``--CourseDirectory.db_url``), p. ex. PostgreSQL.
        env: ambiente já pronto (padrão: :func:`nbgrader_env`).
    """
    extra = [f"--CourseDirectory.db_url={db_url}"] if db_url else []
    return subprocess.run(
        [nbgrader_exe(), *args, *extra],
        cwd=cwd,
        env=env or nbgrader_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
