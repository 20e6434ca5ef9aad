"""Correção para quem estuda sozinho (``make grade [CHAPTER=NN_nome]``).

Corrige as cópias de trabalho do aluno (``aluno/NN_nome/NN_nome.ipynb``) com os testes visíveis
E os ocultos, pelo ``nbgrader autograde`` de verdade, num espaço de correção TEMPORÁRIO: os
arquivos do aluno são só lidos (copiados para lá), nunca alterados. Mostra uma tabela em
português (capítulo, exercício, pontos, o que falhou e por quê) e grava as devolutivas HTML do
nbgrader em ``aluno/devolutivas/NN_nome.html``. As questões abertas aparecem como "a corrigir",
com a nota máxima: quem corrige é uma pessoa (o gabarito com a rubrica está em solutions/).

Uso: python scripts/grade.py [NN_nome ...] [--aluno PASTA] [--devolutivas PASTA]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformer_course.course import CHAPTERS  # noqa: E402
from transformer_course.instructor.faults import fault_in_log  # noqa: E402
from transformer_course.instructor.nbgrader_run import run_nbgrader  # noqa: E402
from transformer_course.instructor.results import check_notebook_file, fmt_points, read_results  # noqa: E402
from transformer_course.instructor.sandbox import require_sandbox, withhold_leaky_feedback  # noqa: E402

STUDENT = "aluno"
IGNORE = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "devolutivas")


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    return run_nbgrader(*args, cwd=course)


def wrap(text: str, indent: str = "      ", width: int = 100) -> str:
    lines = []
    for raw in text.splitlines() or [""]:
        lines.extend(
            textwrap.wrap(raw, width - len(indent), break_long_words=False, break_on_hyphens=False) or [""]
        )
    return "\n".join(indent + line for line in lines)


def grade(names: list[str], workspace: Path, feedback_dir: Path) -> int:
    available = [c for c in CHAPTERS if (ROOT / "source" / c).is_dir()]  # os capítulos deste curso
    unknown = sorted(set(names) - set(available))
    if unknown:
        print(f"capítulos desconhecidos: {', '.join(unknown)}; disponíveis: {', '.join(available)}")
        return 2
    names = names or available
    problems: dict[str, str] = {}
    todo = []
    for name in names:
        reason = check_notebook_file(workspace / name / f"{name}.ipynb")
        if reason and "não está na entrega" in reason:
            reason = f"{workspace.name}/{name}/{name}.ipynb não existe (rode `make lab` para criar a cópia)"
        if reason:
            problems[name] = reason
        else:
            todo.append(name)

    results = {}
    withheld: dict[str, str] = {}
    started = time.perf_counter()
    # Seu próprio notebook: sem bubblewrap, a correção roda sem isolamento (e avisa).
    confined = require_sandbox(self_study=True) if todo else True
    if todo:
        print(
            f"Corrigindo {', '.join(todo)} com os testes visíveis e ocultos (nbgrader autograde)...",
            flush=True,
        )
        with tempfile.TemporaryDirectory(prefix="correcao-") as tmp:
            course = Path(tmp)
            shutil.copy2(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
            for name in todo:
                shutil.copytree(ROOT / "source" / name, course / "source" / name, ignore=IGNORE)
                shutil.copytree(
                    workspace / name, course / "grading" / "submitted" / STUDENT / name, ignore=IGNORE
                )
            run = nbgrader(course, "generate_assignment", "*", "--force")
            if run.returncode != 0:
                print("Falha ao preparar o gradebook temporário (nbgrader generate_assignment):")
                print(run.stdout[-3000:], run.stderr[-3000:])
                return 1
            auto = nbgrader(course, "autograde", "*", "--create", "--force", f"--student={STUDENT}")
            nbgrader(course, "generate_feedback", "*", "--force", f"--student={STUDENT}")
            for name in todo:
                for reason in withhold_leaky_feedback(course, name, [STUDENT]).values():
                    withheld[name] = reason
            from nbgrader.api import Gradebook

            with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
                for name in todo:
                    graded = course / "grading" / "autograded" / STUDENT / name / f"{name}.ipynb"
                    if not graded.exists():
                        fault = fault_in_log(auto.stdout + auto.stderr)
                        if fault:  # o ambiente, não o seu notebook: nada de 0
                            problems[name] = f"falha do CORRETOR, não do seu notebook: {fault}"
                            continue
                        tail = [ln for ln in auto.stderr.splitlines() if "ERROR" in ln or "Error" in ln]
                        problems[name] = "o nbgrader não conseguiu corrigir este notebook" + (
                            f": {tail[-1][-300:]}" if tail else ""
                        )
                        continue
                    results[name] = read_results(graded, gb, name, STUDENT)
                    html = course / "grading" / "feedback" / STUDENT / name / f"{name}.html"
                    if html.exists():
                        feedback_dir.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(html, feedback_dir / f"{name}.html")
    elapsed = time.perf_counter() - started

    print()
    total = [0.0, 0.0]
    manual_total = 0.0
    header = f"  {'exercício':<40} {'tipo':<8} {'pontos':>7}  situação"
    for name in names:
        print(f"== {name} ==")
        if name in problems:
            print(wrap(f"não corrigido: {problems[name]}", "  "))
            print()
            continue
        res = results[name]
        got, most = res.auto
        total[0] += got
        total[1] += most
        print(header)
        for cell in res.cells:
            if cell.kind == "manual":
                status = "a corrigir (questão aberta, nota de uma pessoa)"
                points = fmt_points(cell.score, cell.max_score)
                manual_total += cell.max_score
            else:
                status = "ok" if not cell.failed else "FALHOU"
                points = fmt_points(cell.score, cell.max_score)
            print(f"  {cell.label:<40} {cell.kind:<8} {points:>7}  {status}")
            if cell.failed and cell.reason:
                print(wrap(cell.reason))
        if res.other_errors:
            print("  erros em outras células (podem explicar as falhas acima):")
            for err in res.other_errors[:5]:
                print(wrap(err, "    - ", 100).replace("    - ", "    - ", 1))
        _, manual_max = res.manual
        print(
            f"  automático: {fmt_points(got, most)}"
            + (f"; a corrigir: {fmt_points(None, manual_max)} em questões abertas" if manual_max else "")
        )
        if name in withheld:
            print(wrap(f"devolutiva retida: {withheld[name]}", "  "))
        elif (feedback_dir / f"{name}.html").exists():
            print(f"  devolutiva: {feedback_dir / f'{name}.html'}")
        print()
    print(
        f"Total automático: {fmt_points(*total)} pontos"
        + (
            f" (+ até {fmt_points(manual_total, manual_total).split('/')[0]} nas questões abertas, "
            "corrigidas por uma pessoa)"
            if manual_total
            else ""
        )
        + f". Tempo: {elapsed:.0f} s."
    )
    print("Seus arquivos não foram alterados: a correção rodou numa cópia temporária.")
    if todo:
        print(
            "Isolamento: cada notebook rodou confinado (bubblewrap: sem rede, só a própria pasta)."
            if confined
            else "Isolamento: NÃO (sem bubblewrap); tudo bem para o seu próprio notebook."
        )
    return 1 if problems and not results else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="capítulos (NN_nome); sem nada, todos")
    parser.add_argument("--aluno", type=Path, default=ROOT / "aluno", help="pasta de trabalho (aluno/)")
    parser.add_argument(
        "--devolutivas",
        type=Path,
        default=None,
        help="onde gravar as devolutivas HTML (padrão: <aluno>/devolutivas)",
    )
    args = parser.parse_args(argv)
    feedback_dir = args.devolutivas or args.aluno / "devolutivas"
    return grade(args.chapters, args.aluno.resolve(), feedback_dir.resolve())


if __name__ == "__main__":
    sys.exit(main())
