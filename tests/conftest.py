"""Configuração comum dos testes: descoberta dos capítulos e o ambiente do nbgrader."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from transformer_course.course import CHAPTERS as COURSE_CHAPTERS

# Entregas de propósito quebradas (JSON inválido...) para os testes de correção: não são testes.
collect_ignore = ["fixtures"]

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CHAPTERS = list(COURSE_CHAPTERS)

# O nbgrader chama `alembic` pelo PATH; os kernels devem ser os deste ambiente.
os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"


def nbgrader(cwd: Path, *args: str, check: bool = True, timeout: int = 900) -> subprocess.CompletedProcess:
    """Roda um comando do nbgrader a partir de ``cwd`` (a raiz de um curso)."""
    result = subprocess.run(
        [str(BIN / "nbgrader"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    if check and result.returncode != 0:
        raise AssertionError(f"nbgrader {' '.join(args)} falhou:\n{result.stdout}\n{result.stderr}")
    return result


def copy_course(target: Path, parts=("source", "release", "solutions", "notebooks", "scripts")) -> Path:
    """Cópia mínima do curso num diretório temporário (sem grading/ nem .venv)."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "nbgrader_config.py", target / "nbgrader_config.py")
    for part in parts:
        shutil.copytree(
            ROOT / part, target / part, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
        )
    return target
