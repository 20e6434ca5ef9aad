"""Custo do isolamento na correção: ``nbgrader autograde`` confinado (bubblewrap) x sem isolamento.

Numa cópia temporária do curso, corrige o gabarito de um capítulo para alguns alunos, alternando
as duas formas (mesma carga da máquina para as duas), e imprime o tempo por notebook e a diferença.

Uso: python scripts/bench_sandbox.py [NN_nome] [--alunos N] [--rodadas R]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformer_course.instructor.nbgrader_run import nbgrader_env, run_nbgrader  # noqa: E402
from transformer_course.instructor.sandbox import UNCONFINED_ENV, sandbox_problem  # noqa: E402


def _course(tmp: Path, chapter: str, students: int) -> Path:
    course = tmp / "curso"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    for part in ("source", "release", "solutions"):
        shutil.copytree(ROOT / part / chapter, course / part / chapter)
    run = run_nbgrader("generate_assignment", chapter, "--force", cwd=course, timeout=None)
    if run.returncode:
        raise SystemExit(run.stderr[-2000:])
    for i in range(students):
        folder = course / "grading" / "submitted" / f"aluno{i}" / chapter
        folder.mkdir(parents=True)
        shutil.copy2(ROOT / "solutions" / chapter / f"{chapter}.ipynb", folder / f"{chapter}.ipynb")
    return course


def _autograde(course: Path, chapter: str, confined: bool) -> float:
    env = nbgrader_env()
    args = ["autograde", chapter, "--create", "--force"]
    if not confined:
        env[UNCONFINED_ENV] = "1"
        args.append("--SandboxedKernelManager.confine=False")
    started = time.perf_counter()
    run = run_nbgrader(*args, cwd=course, env=env, timeout=None)
    elapsed = time.perf_counter() - started
    if run.returncode or ("confinado" in run.stderr) != confined:
        raise SystemExit(f"autograde falhou ou não isolou como pedido:\n{run.stderr[-3000:]}")
    return elapsed


def measure(chapter: str = "02_atencao", students: int = 2, rounds: int = 3) -> dict:
    """Segundos por notebook (mediana das rodadas) com e sem isolamento, e a diferença em %."""
    problem = sandbox_problem()
    if problem:
        raise SystemExit(f"o isolamento não roda aqui: {problem}")
    times = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="bench-isolamento-") as tmp:
        course = _course(Path(tmp), chapter, students)
        _autograde(course, chapter, True)  # aquece caches do disco
        for _ in range(rounds):
            for confined in (False, True):
                times[confined].append(_autograde(course, chapter, confined) / students)
    plain, boxed = statistics.median(times[False]), statistics.median(times[True])
    return {"sem": plain, "com": boxed, "extra_pct": 100 * (boxed - plain) / plain, "rodadas": times}


def floor(rounds: int = 5) -> dict:
    """Partida de um kernel + ``import torch, transformer_course`` (nbclient), com e sem isolamento."""
    import nbformat
    from nbclient import NotebookClient
    from traitlets.config import Config

    from transformer_course.instructor.sandbox import SandboxedKernelManager

    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("import torch, transformer_course.checks")]
    )
    times = {True: [], False: []}
    os.environ[UNCONFINED_ENV] = "1"  # só para a rodada sem isolamento (confine=False)
    with tempfile.TemporaryDirectory(prefix="bench-piso-") as tmp:
        os.chmod(tmp, 0o755)
        for _ in range(rounds):
            for confined in (False, True):
                client = NotebookClient(
                    nb,
                    kernel_manager_class=SandboxedKernelManager,
                    config=Config({"SandboxedKernelManager": {"confine": confined}}),
                    resources={"metadata": {"path": tmp}},
                    timeout=120,
                )
                started = time.perf_counter()
                client.execute()
                times[confined].append(time.perf_counter() - started)
    del os.environ[UNCONFINED_ENV]
    plain, boxed = statistics.median(times[False]), statistics.median(times[True])
    return {"sem": plain, "com": boxed, "extra_pct": 100 * (boxed - plain) / plain, "rodadas": times}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapter", nargs="?", default="02_atencao")
    parser.add_argument("--alunos", type=int, default=2)
    parser.add_argument("--rodadas", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    base = floor()
    print(
        f"isolamento, partida do kernel + import torch (mediana de 5): {base['sem']:.2f} s sem, "
        f"{base['com']:.2f} s com bubblewrap ({base['extra_pct']:+.0f} %)"
    )
    res = measure(args.chapter, args.alunos, args.rodadas)
    spread = {k: f"{min(v):.1f}–{max(v):.1f}" for k, v in res["rodadas"].items()}
    print(
        f"isolamento, autograde ({args.chapter}, {args.alunos} alunos x {args.rodadas} rodadas): "
        f"{res['sem']:.1f} s/notebook sem ({spread[False]}), {res['com']:.1f} s com bubblewrap "
        f"({spread[True]}): {res['extra_pct']:+.0f} %"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
