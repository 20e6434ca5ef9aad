"""Copia cada capítulo de release/ para a pasta de trabalho do aluno, sem sobrescrever nada.

Um arquivo que já existe na pasta de trabalho nunca é tocado: o que o aluno
escreveu fica. Capítulos novos (ou arquivos apagados pelo aluno) são copiados.

Uso: python scripts/make_workspace.py [pasta]   (padrão: aluno/)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_workspace(target: Path) -> list[Path]:
    copied = []
    for src in sorted((ROOT / "release").glob("[0-9][0-9]_*/**/*")):
        if src.is_dir() or ".ipynb_checkpoints" in src.parts:
            continue
        dest = target / src.relative_to(ROOT / "release")
        if dest.exists():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
        copied.append(dest)
    return copied


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "aluno"
    copied = make_workspace(target)
    for path in copied:
        print(f"copiado: {path.relative_to(target.parent)}")
    print(f"pasta de trabalho: {target} ({len(copied)} arquivo(s) novo(s); nada foi sobrescrito)")
