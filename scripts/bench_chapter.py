"""O tempo de um capítulo, célula por célula, como o aluno o roda e como a correção o roda.

Para cada capítulo pedido, num kernel novo de cada vez e na mesma rodada:

1. o piso: só a primeira célula de código (as importações), com a partida do kernel;
2. o notebook de ``solutions/`` no modo da correção (``NBGRADER_EXECUTION=autograde``, como o
   nbgrader define), e a razão para o piso (meta: ≤ 2×);
3. o notebook de ``source/`` como o aluno o roda (meta: ≤ 45 s);

e as células mais caras de cada execução (tempos gravados pelo nbclient). Imprime números, não
faz asserções. Numa máquina ocupada, compare as razões, não os segundos.

Uso: python scripts/bench_chapter.py [NN_nome ...] [--top 6] [--sem-aluno]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformer_course.course import CHAPTERS  # noqa: E402


def execute(nb, env: dict[str, str | None]) -> float:
    """Executa ``nb`` num kernel novo com as variáveis ``env`` (``None``: sem a variável); devolve o
    tempo total (s)."""
    saved = {k: os.environ.get(k) for k in env}
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    try:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            NotebookClient(
                nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp}}
            ).execute()
            return time.perf_counter() - start
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def cell_times(nb) -> list[tuple[float, str]]:
    """(segundos, primeira linha) de cada célula de código, pelos tempos gravados pelo nbclient."""
    out = []
    for cell in nb.cells:
        timing = cell.get("metadata", {}).get("execution", {})
        start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        if cell.cell_type == "code" and start and end:
            seconds = (datetime.fromisoformat(end[:-1]) - datetime.fromisoformat(start[:-1])).total_seconds()
            lines = (ln for ln in cell.source.splitlines() if ln.strip() and not ln.startswith("#"))
            first = next(lines, "")
            out.append((seconds, first[:70]))
    return sorted(out, reverse=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="capítulos (NN_nome); sem nada, todos")
    parser.add_argument("--top", type=int, default=6, help="quantas células caras mostrar")
    parser.add_argument("--sem-aluno", action="store_true", help="pula a execução como o aluno (source/)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.chapters) - set(CHAPTERS))
    if unknown:
        print(f"capítulos desconhecidos: {unknown}; disponíveis: {list(CHAPTERS)}")
        return 2
    print(f"máquina: {os.cpu_count()} núcleos; carga: {os.getloadavg()[0]:.2f}")
    grading = {"NBGRADER_EXECUTION": "autograde", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    for chapter in args.chapters or CHAPTERS:
        solution = nbformat.read(ROOT / "solutions" / chapter / f"{chapter}.ipynb", as_version=4)
        first = next(c for c in solution.cells if c.cell_type == "code")
        floor_s = execute(nbformat.v4.new_notebook(cells=[first], metadata=solution.metadata), grading)
        graded_s = execute(solution, grading)
        print(
            f"{chapter}: piso {floor_s:.1f} s; correção {graded_s:.1f} s = {graded_s / floor_s:.2f}× o piso"
        )
        for seconds, line in cell_times(solution)[: args.top]:
            print(f"    {seconds:6.2f} s  {line}")
        if not args.sem_aluno:
            source = nbformat.read(ROOT / "source" / chapter / f"{chapter}.ipynb", as_version=4)
            # como o aluno: o OMP_NUM_THREADS do ambiente, se houver (vazio seria um valor inválido)
            student_s = execute(source, {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")})
            print(f"  como o aluno roda (source/): {student_s:.1f} s (meta: ≤ 45 s)")
            for seconds, line in cell_times(source)[: args.top]:
                print(f"    {seconds:6.2f} s  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
