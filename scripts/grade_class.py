"""Corrige a turma inteira (``make grade-class [CHAPTER=NN_nome]``), com os comandos do nbgrader.

Para cada capítulo (``source/NN_nome/``) e cada aluno com pasta em ``grading/submitted/``:

1. confere as entregas antes (notebook ausente, JSON inválido) para dar o motivo em português;
2. ``nbgrader autograde NN_nome --create`` (todas as entregas do capítulo; o nbgrader segue
   para a próxima quando uma falha; um laço infinito é cortado pelo ``Execute.timeout``);
3. ``nbgrader generate_feedback NN_nome`` (devolutivas HTML em pt-BR, sem os testes ocultos);
4. no fim, ``nbgrader export --to grading/notas.csv``.

Imprime o quadro alunos × capítulos (pontos automáticos; "*" = questões abertas ainda sem nota,
corrija no formgrader) e a lista de falhas com o motivo. Nunca altera ``grading/submitted/``.
Uma entrega já corrigida só é corrigida de novo com ``--force`` (ou se a entrega for mais nova).
O código de saída é 0 mesmo com entregas ruins (elas aparecem no relatório); 1 só quando o
nbgrader não pôde rodar.

Uso: python scripts/grade_class.py [NN_nome ...] [--force] [--timeout SEGUNDOS]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformer_course.grading import (  # noqa: E402
    chapters,
    check_notebook_file,
    fmt_points,
    nbgrader_env,
    nbgrader_exe,
    read_results,
)

SUBMITTED = ROOT / "grading" / "submitted"
AUTOGRADED = ROOT / "grading" / "autograded"


def nbgrader(*args: str, timeout: int = 6 * 3600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [nbgrader_exe(), *args], cwd=ROOT, env=nbgrader_env(), capture_output=True, text=True, timeout=timeout
    )


def _log_reason(log: str, student: str, chapter: str) -> str:
    """O motivo que o nbgrader registrou para uma entrega que ele não conseguiu corrigir."""
    lines = log.splitlines()
    marker = f"{SUBMITTED / student / chapter}"
    start = None
    for i, line in enumerate(lines):
        if marker in line and ("error processing" in line or "While processing" in line):
            start = i
    if start is None:
        return "o nbgrader não gerou a versão corrigida (veja grading/autograde.log)"
    block = lines[start : start + 80]
    text = "\n".join(block)
    if "became unresponsive" in text or "UnresponsiveKernelError" in text:
        return (
            "o kernel não respondeu nem à interrupção (um laço que ignora Ctrl-C, ou memória "
            "esgotada): o nbgrader desistiu desta entrega"
        )
    if "NotJSONError" in text:
        return "o notebook não é um JSON válido"
    if "DeadKernelError" in text or "Kernel died" in text:
        return "o kernel morreu durante a execução (memória esgotada? os._exit?)"
    for line in reversed(block):
        stripped = line.strip()
        if stripped and not stripped.startswith(("File ", "^", "[")) and ":" in stripped:
            return f"erro do nbgrader: {stripped[:300]}"
    return "o nbgrader não gerou a versão corrigida (veja grading/autograde.log)"


def summary_line(reason: str, limit: int = 300) -> str:
    """A linha mais informativa de uma mensagem de verificação (o diagnóstico, se houver)."""
    lines = [ln.strip() for ln in reason.splitlines() if ln.strip()] or ["sem mensagem"]
    useful = [ln for ln in lines if not ln.endswith("falhou.") and not ln.startswith("Teste:")] or lines
    diagnosis = next((ln for ln in useful if ln.startswith("Diagnóstico")), "")
    line = useful[0] if not diagnosis or diagnosis == useful[0] else f"{useful[0]} {diagnosis}"
    return line if len(line) <= limit else line[: limit - 1] + "…"


def ensure_assignment(chapter: str) -> str | None:
    """Registra o capítulo no gradebook se faltar (sem tocar em release/)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{ROOT / 'grading' / 'gradebook.db'}") as gb:
        try:
            if gb.find_assignment(chapter).notebooks:
                return None
        except MissingEntry:
            pass
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        run = nbgrader(
            "generate_assignment", chapter, "--force", f"--CourseDirectory.release_directory={tmp}"
        )
    if run.returncode != 0:
        return f"nbgrader generate_assignment {chapter} falhou:\n{run.stderr[-2000:]}"
    return None


DB_ERRORS = (
    "database is locked",
    "OperationalError",
    "IntegrityError",
    "error accessing the nbgrader database",
)


def autograde_parallel(chapter: str, students: list[str], jobs: int, extra: list[str]) -> tuple[str, int]:
    """Um ``nbgrader autograde --student X`` por aluno, ``jobs`` de cada vez, no mesmo gradebook SQLite.

    Cada processo escreve só as linhas do seu aluno; os alunos são criados antes, aqui, para que
    dois processos não tentem criar a mesma linha. Um processo que falhar por acesso ao banco
    (``database is locked``) é refeito depois, sozinho. Devolve o log e quantos foram refeitos.
    """
    from concurrent.futures import ThreadPoolExecutor

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{ROOT / 'grading' / 'gradebook.db'}") as gb:
        for student in students:
            gb.update_or_create_student(student)

    def one(student: str) -> subprocess.CompletedProcess:
        return nbgrader("autograde", chapter, f"--student={student}", *extra)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        runs = dict(zip(students, pool.map(one, students)))
    retried = 0
    for student, run in runs.items():
        if run.returncode != 0 and any(err in run.stderr for err in DB_ERRORS):
            retried += 1
            runs[student] = one(student)
    return "\n".join(f"--- {s}\n{r.stderr}" for s, r in runs.items()), retried


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="capítulos (NN_nome); sem nada, todos")
    parser.add_argument("--force", action="store_true", help="corrige de novo o que já foi corrigido")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="processos do nbgrader em paralelo, um aluno por processo (padrão: 1)",
    )
    parser.add_argument(
        "--timeout",
        type=int,
        default=None,
        help="limite por célula em segundos (padrão: Execute.timeout do nbgrader_config.py)",
    )
    args = parser.parse_args(argv)

    available = chapters(ROOT)
    unknown = sorted(set(args.chapters) - set(available))
    if unknown:
        print(f"capítulos desconhecidos: {', '.join(unknown)}; disponíveis: {', '.join(available)}")
        return 2
    names = args.chapters or available
    students = sorted(p.name for p in SUBMITTED.glob("*") if p.is_dir()) if SUBMITTED.exists() else []
    if not students:
        print(
            f"Nenhuma entrega em {SUBMITTED.relative_to(ROOT)}/<aluno>/<capítulo>/ "
            "(use `nbgrader collect` ou `nbgrader zip_collect`; veja grading/README.md)."
        )
        return 0

    status: dict[tuple[str, str], str] = {}
    failures: list[tuple[str, str, str]] = []
    timings: dict[str, tuple[float, int]] = {}
    extra = [f"--Execute.timeout={args.timeout}"] if args.timeout else []
    retries = 0
    log_path = ROOT / "grading" / "autograde.log"
    log_path.parent.mkdir(exist_ok=True)
    logs = []
    for chapter in names:
        pending = []
        for student in students:
            folder = SUBMITTED / student / chapter
            if not folder.is_dir():
                status[student, chapter] = "—"
                continue
            reason = check_notebook_file(folder / f"{chapter}.ipynb")
            if reason:
                status[student, chapter] = "ERRO"
                failures.append((student, chapter, reason))
                continue
            pending.append(student)
        if not pending:
            continue
        problem = ensure_assignment(chapter)
        if problem:
            print(problem)
            return 1
        print(
            f"{chapter}: corrigindo {len(pending)} entrega(s)"
            + (f" em {args.jobs} processos" if args.jobs > 1 else "")
            + "...",
            flush=True,
        )
        started = time.perf_counter()
        force = ["--force"] if args.force else []
        if args.jobs > 1:
            stderr, retried = autograde_parallel(chapter, pending, args.jobs, [*force, *extra])
            retries += retried
            run = subprocess.CompletedProcess([], 0, "", stderr)
        else:
            run = nbgrader("autograde", chapter, "--create", *force, *extra)
        timings[chapter] = (time.perf_counter() - started, len(pending))
        logs.append(f"===== nbgrader autograde {chapter} (código {run.returncode})\n{run.stderr}")
        feedback = nbgrader("generate_feedback", chapter, *(["--force"] if args.force else []))
        logs.append(
            f"===== nbgrader generate_feedback {chapter} (código {feedback.returncode})\n{feedback.stderr}"
        )
        from nbgrader.api import Gradebook

        with Gradebook(f"sqlite:///{ROOT / 'grading' / 'gradebook.db'}") as gb:
            for student in pending:
                graded = AUTOGRADED / student / chapter / f"{chapter}.ipynb"
                if not graded.exists():
                    status[student, chapter] = "ERRO"
                    failures.append((student, chapter, _log_reason(run.stderr, student, chapter)))
                    continue
                try:
                    res = read_results(graded, gb, chapter, student)
                except Exception as exc:  # noqa: BLE001 - uma entrega estranha não para a turma
                    status[student, chapter] = "ERRO"
                    failures.append((student, chapter, f"resultado ilegível: {type(exc).__name__}: {exc}"))
                    continue
                got, most = res.auto
                manual_score, manual_max = res.manual
                mark = "*" if manual_max and manual_score is None else ""
                status[student, chapter] = fmt_points(got, most) + mark
                for cell in res.cells:
                    if cell.failed:
                        why = summary_line(cell.reason)
                        points = fmt_points(cell.score, cell.max_score)
                        failures.append((student, chapter, f"{cell.label} ({cell.kind}) {points}: {why}"))
                for error in res.other_errors[:3]:
                    failures.append((student, chapter, f"erro em outra célula: {summary_line(error)}"))
    log_path.write_text("\n".join(logs))
    export = nbgrader("export", f"--to={ROOT / 'grading' / 'notas.csv'}")

    # ---------------------------------------------------------------- relatório
    print()
    width = max(len(s) for s in students + ["aluno"]) + 2
    cols = [max(len(c), 8) + 2 for c in names]
    print("aluno".ljust(width) + "".join(c.ljust(w) for c, w in zip(names, cols)))
    for student in students:
        print(
            student.ljust(width)
            + "".join(status.get((student, c), "—").ljust(w) for c, w in zip(names, cols))
        )
    print("\n(pontos automáticos; * = questões abertas a corrigir no formgrader; — = não entregou)")
    errors = [f for f in failures if status.get((f[0], f[1])) == "ERRO"]
    lost = [f for f in failures if status.get((f[0], f[1])) != "ERRO"]
    if errors:
        print(f"\nEntregas que não puderam ser corrigidas ({len(errors)}):")
        for student, chapter, reason in errors:
            print(f"  {student} / {chapter}: {reason}")
    if lost:
        print(f"\nTestes que falharam ({len(lost)}):")
        for student, chapter, reason in lost:
            print(f"  {student} / {chapter}: {reason}")
    if args.jobs > 1:
        print(
            f"paralelo: {args.jobs} processos; {retries} entrega(s) refeita(s) em sequência "
            "por erro de acesso ao gradebook"
        )
    for chapter, (secs, n) in timings.items():
        print(f"tempo de {chapter}: {secs:.0f} s para {n} entrega(s) ({secs / n:.1f} s por entrega)")
    print(
        f"log do nbgrader: {log_path.relative_to(ROOT)}; devolutivas: grading/feedback/; "
        + ("notas: grading/notas.csv" if export.returncode == 0 else "export falhou (veja o log)")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
