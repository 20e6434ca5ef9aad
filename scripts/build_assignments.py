"""Gera source/, release/ e solutions/ a partir de notebooks/ (``make assignments``).

1. jupytext converte ``notebooks/NN_nome.py`` em ``source/NN_nome/NN_nome.ipynb``,
   com ids de célula estáveis (o grade_id, ou um hash do conteúdo) e sem saídas; a prosa do
   capítulo vai para ``transformer_course/corpus/NN_nome.md`` (o corpus do capítulo 7).
2. ``nbgrader generate_assignment`` gera a versão do aluno em ``release/``.
3. ``nbgrader generate_solution`` gera o gabarito em ``solutions/``.

Os comandos do nbgrader escrevem numa pasta temporária, que só substitui a pasta
final se tudo deu certo (o ``--force`` do nbgrader apaga a saída antes de gerar).

Uso: python scripts/build_assignments.py [NN_nome ...]   (sem argumentos: todos)
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jupytext
import nbformat

from transformer_course.course import CHAPTERS

ROOT = Path(__file__).resolve().parent.parent


def stable_ids(nb: nbformat.NotebookNode) -> None:
    """Ids fixos: o grade_id do nbgrader quando existe, senão um hash do conteúdo."""
    seen: set[str] = set()
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        base = grade_id or f"{cell.cell_type[:2]}-{hashlib.sha1(cell.source.encode()).hexdigest()[:10]}"
        cell_id, k = base, 1
        while cell_id in seen:
            k += 1
            cell_id = f"{base}-{k}"
        seen.add(cell_id)
        cell.id = cell_id


def build_source(name: str) -> Path:
    nb = jupytext.read(ROOT / "notebooks" / f"{name}.py")
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = {
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "name": "python3",
    }
    nb.metadata["language_info"] = {"name": "python"}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.nbformat, nb.nbformat_minor = 4, 5
    stable_ids(nb)
    nbformat.validate(nb)
    out = ROOT / "source" / name / f"{name}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)
    write_corpus(name, nb)
    return out


def write_corpus(name: str, nb: nbformat.NotebookNode) -> None:
    """A prosa do capítulo para o corpus do capítulo 7: ``transformer_course/corpus/<nome>.md``.

    Só as células de texto que o aluno lê (as perguntas abertas, com a resposta-modelo, ficam de
    fora), na ordem do notebook. ``transformer_course.text.course_corpus`` lê estes arquivos.
    """
    prose = [
        cell.source.strip()
        for cell in nb.cells
        if cell.cell_type == "markdown" and "nbgrader" not in cell.metadata and cell.source.strip()
    ]
    out = ROOT / "transformer_course" / "corpus" / f"{name}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n\n".join(prose) + "\n", encoding="utf-8")


def nbgrader(*args: str) -> None:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [str(Path(sys.executable).parent / "nbgrader"), *args, "--log-level=WARN"]
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0 or "[ERROR]" in result.stderr:
        sys.exit(f"nbgrader {' '.join(args)} falhou:\n{result.stdout}\n{result.stderr}")


def generate(name: str) -> None:
    # Um gradebook SQLite para todos: duas gerações ao mesmo tempo esperam a vez.
    lock_path = ROOT / "grading" / ".build.lock"
    lock_path.parent.mkdir(exist_ok=True)
    with open(lock_path, "w") as lock, tempfile.TemporaryDirectory() as tmp:
        fcntl.flock(lock, fcntl.LOCK_EX)
        release, solutions = Path(tmp) / "release", Path(tmp) / "solutions"
        nbgrader("generate_assignment", name, "--force", f"--CourseDirectory.release_directory={release}")
        nbgrader("generate_solution", name, "--force", f"--CourseDirectory.solution_directory={solutions}")
        for produced, final in (
            (release / name, ROOT / "release" / name),
            (solutions / name, ROOT / "solutions" / name),
        ):
            if not (produced / f"{name}.ipynb").exists():
                sys.exit(f"o nbgrader não gerou {produced / name}.ipynb")
            shutil.rmtree(final, ignore_errors=True)
            final.parent.mkdir(exist_ok=True)
            shutil.copytree(produced, final)


def main(names: list[str]) -> None:
    names = names or list(CHAPTERS)
    unknown = sorted(set(names) - set(CHAPTERS))
    if unknown:
        sys.exit(f"capítulos desconhecidos: {unknown}; disponíveis: {list(CHAPTERS)}")
    for name in names:
        build_source(name)
        generate(name)
        print(f"{name}: source/, release/ e solutions/ gerados")


if __name__ == "__main__":
    main(sys.argv[1:])
