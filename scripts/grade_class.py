"""Corrige a turma inteira (``make grade-class [CHAPTER=NN_nome]``) num cluster Dask, com o nbgrader.

Para cada capítulo (``source/NN_nome/``) e cada aluno com pasta em ``grading/submitted/``:

1. confere as entregas antes (notebook ausente, JSON inválido) para dar o motivo em português;
2. prepara o gradebook ANTES de espalhar as tarefas: tabelas, alunos e capítulos (assim duas
   tarefas nunca criam a mesma linha, no SQLite ou no PostgreSQL);
3. uma tarefa do Dask por (aluno, capítulo): ``autograde`` + ``generate_feedback`` do nbgrader
   para aquela entrega, pela API Python do nbgrader, dentro do worker (o nbgrader parte uma vez
   por worker, não uma vez por notebook). Por padrão num ``LocalCluster`` embutido (um worker por
   núcleo, uma thread cada, processos separados); com ``--scheduler tcp://HOST:8786``, num cluster
   que já existe (workers ``dask worker`` que veem a mesma pasta do curso e o mesmo banco);
4. no fim, ``nbgrader export --to grading/notas.csv``.

Com ``--sequencial``, sem Dask: a mesma tarefa, uma entrega depois da outra, neste processo.

Imprime o quadro alunos × capítulos (pontos automáticos; "*" = questões abertas ainda sem nota,
corrija no formgrader) e a lista de falhas com o motivo. Nunca altera ``grading/submitted/``.
Uma entrega já corrigida só é corrigida de novo com ``--force`` (ou se a entrega for mais nova).
O código de saída é 0 mesmo com entregas ruins (elas aparecem no relatório); 1 quando o
nbgrader não pôde rodar ou o banco de notas não responde. Se o banco cai no meio do lote, cada
entrega o espera por até ``--db-wait`` segundos; se ele não volta, a correção para com um erro que
diz qual banco faltou (sem a senha), e nada fica pela metade: as notas de um notebook entram numa
transação só, a versão corrigida de uma entrega interrompida é apagada e a marca em
``grading/.em_andamento/`` faz a próxima execução refazê-la por inteiro.

Uso: python scripts/grade_class.py [NN_nome ...] [--force] [--timeout S] [--db URL]
     [--scheduler tcp://HOST:8786 | --workers N | --sequencial]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformer_course.course import CHAPTERS  # noqa: E402
from transformer_course.instructor.cluster import (  # noqa: E402
    DatabaseUnavailable,
    TaskResult,
    course_db_url,
    db_unavailable_message,
    describe_db,
    grade_submission,
    load_course_config,
    prepare_gradebook,
    quiet_worker,
    register_assignment,
    wait_for_db,
)
from transformer_course.instructor.nbgrader_run import nbgrader_env, run_nbgrader  # noqa: E402
from transformer_course.instructor.results import check_notebook_file, fmt_points, read_results  # noqa: E402

SUBMITTED = ROOT / "grading" / "submitted"
AUTOGRADED = ROOT / "grading" / "autograded"


def summary_line(reason: str, limit: int = 300) -> str:
    """A linha mais informativa de uma mensagem de verificação (o diagnóstico, se houver)."""
    lines = [ln.strip() for ln in reason.splitlines() if ln.strip()] or ["sem mensagem"]
    useful = [ln for ln in lines if not ln.endswith("falhou.") and not ln.startswith("Teste:")] or lines
    diagnosis = next((ln for ln in useful if ln.startswith("Diagnóstico")), "")
    line = useful[0] if not diagnosis or diagnosis == useful[0] else f"{useful[0]} {diagnosis}"
    return line if len(line) <= limit else line[: limit - 1] + "…"


def confinement_problem(allow_unconfined: bool) -> str | None:
    """GANCHO DO ISOLAMENTO (correção segura): recusa corrigir sem o kernel confinado.

    O isolamento em si vem do ``nbgrader_config.py`` do curso, que cada tarefa carrega (o kernel de
    toda entrega parte confinado pelo bubblewrap). Aqui se confere, antes de espalhar as tarefas,
    que a máquina consegue confinar (:func:`transformer_course.instructor.sandbox.require_sandbox`);
    sem isso, a correção só roda com ``--sem-isolamento`` (que os workers do ``LocalCluster`` herdam pelo
    ambiente). Workers de um cluster externo (``--scheduler``) conferem com a configuração deles.
    """
    from transformer_course.instructor.sandbox import SandboxUnavailable, require_sandbox

    try:
        require_sandbox(allow_unconfined=allow_unconfined)
    except SandboxUnavailable as exc:
        return str(exc)
    return None


# ====================================================================== as duas formas de corrigir


def grade_sequential(pairs: list[tuple[str, str]], args, db_url: str) -> tuple[list[TaskResult], str]:
    """Sem Dask: a mesma tarefa (API Python do nbgrader), uma entrega depois da outra, neste processo."""
    from tqdm import tqdm

    os.environ.update(nbgrader_env())
    results = []
    down = None
    for student, chapter in tqdm(pairs, desc="corrigindo", unit="entrega"):
        if down:
            results.append(not_started(student, chapter, down))
            continue
        task = grade_submission(
            str(ROOT), chapter, student, db_url, force=args.force, timeout=args.timeout, db_wait=args.db_wait
        )
        task.worker = "sequencial"
        results.append(task)
        if task.db_down and database_down(db_url):
            down = task.reason
    log = "\n".join(f"===== {r.chapter} / {r.student}\n{r.log}" for r in results)
    return results, log


def database_down(db_url: str) -> bool:
    """O banco continua fora do ar agora (depois de uma tarefa ter esperado --db-wait por ele)?"""
    try:
        wait_for_db(db_url, wait=0)
    except DatabaseUnavailable:
        return True
    return False


def not_started(student: str, chapter: str, reason: str) -> TaskResult:
    return TaskResult(student, chapter, False, reason, db_down=True, worker="não iniciada")


def open_client(args):
    """Um cliente Dask: o cluster de ``--scheduler`` ou um ``LocalCluster`` embutido."""
    import logging
    import os

    from distributed import Client, LocalCluster

    if args.scheduler:
        return Client(args.scheduler, timeout=30), None
    workers = args.workers or os.cpu_count() or 1
    os.environ.update(nbgrader_env())  # os workers herdam o PATH (alembic, kernel) e os avisos calados
    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        memory_limit=0,
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    client = Client(cluster)
    client.run(quiet_worker, str(ROOT / "grading" / "dask-workers.log"))
    return client, cluster


def grade_on_dask(pairs: list[tuple[str, str]], args, db_url: str) -> tuple[list[TaskResult], str]:
    """Uma tarefa do Dask por (aluno, capítulo); barra de progresso do lado do instrutor."""
    from distributed import Event, as_completed
    from tqdm import tqdm

    client, cluster = open_client(args)
    # Marcado quando o banco cai e não volta no prazo: as tarefas que ainda não começaram voltam
    # sem tocar em nada (em vez de cada uma esperar o banco mais --db-wait segundos).
    stop = f"banco-fora-{time.time_ns()}"
    stopped = Event(stop, client=client)
    try:
        n_workers = len(client.scheduler_info()["workers"])
        where = args.scheduler or "LocalCluster embutido"
        print(f"Dask: {where}, {n_workers} worker(s); {len(pairs)} entrega(s)", flush=True)
        futures = {}
        for student, chapter in pairs:
            future = client.submit(
                grade_submission,
                str(ROOT),
                chapter,
                student,
                db_url,
                force=args.force,
                timeout=args.timeout,
                db_wait=args.db_wait,
                stop_event=stop,
                key=f"corrige-{chapter}-{student}-{time.time_ns()}",
                pure=False,
            )
            futures[future] = (student, chapter)
        results = []
        for future in tqdm(as_completed(futures), total=len(futures), desc="corrigindo", unit="entrega"):
            student, chapter = futures[future]
            try:
                task = future.result()
                results.append(task)
                if task.db_down and not stopped.is_set() and database_down(db_url):
                    stopped.set()
            except Exception as exc:  # noqa: BLE001 - KilledWorker etc.: a turma segue
                why = f"{type(exc).__name__}: {exc}"
                if type(exc).__name__ == "KilledWorker":
                    why = "os workers do Dask morreram repetidas vezes com esta entrega (memória esgotada?)"
                results.append(TaskResult(student, chapter, False, why))
        log = "\n".join(
            f"===== {r.chapter} / {r.student} (worker {r.worker}, novas tentativas {r.retries})\n{r.log}"
            for r in sorted(results, key=lambda r: (r.chapter, r.student))
        )
        return results, log
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def read_scores(results: list[TaskResult], status: dict, failures: list, db_url: str) -> None:
    """Lê do gradebook as notas de cada tarefa (o quadro e a lista de testes que falharam)."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        for task in results:
            student, chapter = task.student, task.chapter
            graded = AUTOGRADED / student / chapter / f"{chapter}.ipynb"
            if task.withheld:
                failures.append((student, chapter, f"devolutiva retida: {task.withheld}"))
            if not task.ok or not graded.exists():
                status[student, chapter] = "ERRO"
                failures.append((student, chapter, task.reason or "o nbgrader não gerou a versão corrigida"))
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


def database_failed(db_url: str, results: list[TaskResult], down: list[TaskResult]) -> int:
    """O banco caiu no meio do lote e não voltou: erro claro, em pt-BR, e o que ficou para depois."""
    done = [r for r in results if r.ok and not r.db_down]
    pending = [r for r in down if not r.ok]
    no_feedback = [r for r in down if r.ok]
    first = next((r for r in down if r.worker != "não iniciada" and "não iniciada" not in r.reason), down[0])
    print(f"\nCorreção interrompida: {first.reason}")
    print(
        f"Corrigidas antes da queda: {len(done) + len(no_feedback)} de {len(results)} entrega(s)"
        + (f" ({len(no_feedback)} ainda sem devolutiva)" if no_feedback else "")
        + "."
    )
    if pending:
        print(
            f"Não corrigidas ({len(pending)}; sem versão corrigida e sem nota parcial no gradebook, "
            "refeitas por inteiro na próxima execução):"
        )
        for task in sorted(pending, key=lambda r: (r.chapter, r.student)):
            print(f"  {task.student} / {task.chapter}")
    print(
        "Quando o banco voltar, rode de novo o mesmo comando: o que já foi corrigido não é corrigido "
        "outra vez. Log do nbgrader: grading/autograde.log."
    )
    return 1


# ====================================================================== principal


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="capítulos (NN_nome); sem nada, todos")
    parser.add_argument("--force", action="store_true", help="corrige de novo o que já foi corrigido")
    parser.add_argument(
        "--timeout",
        type=int,
        default=None,
        help="limite por célula em segundos (padrão: Execute.timeout do nbgrader_config.py)",
    )
    parser.add_argument(
        "--db",
        default=None,
        help="banco de notas (db_url do nbgrader), ex.: postgresql://usuario@host:5432/notas "
        "(padrão: o SQLite grading/gradebook.db)",
    )
    parser.add_argument(
        "--db-wait",
        type=float,
        default=120.0,
        help="segundos que cada entrega espera o banco voltar, se ele cair (padrão: 120)",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--scheduler", default=None, help="cluster Dask existente (tcp://HOST:8786)")
    where.add_argument(
        "--workers", type=int, default=None, help="workers do LocalCluster embutido (padrão: núcleos)"
    )
    where.add_argument(
        "--sequencial", action="store_true", help="sem Dask: nbgrader autograde, um capítulo por vez"
    )
    parser.add_argument(
        "--sem-isolamento",
        action="store_true",
        help="aceita corrigir sem o kernel confinado onde o isolamento não existe (arriscado)",
    )
    args = parser.parse_args(argv)

    available = [c for c in CHAPTERS if (ROOT / "source" / c).is_dir()]  # os capítulos deste curso
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

    # ---------------------------------------------------------------- isolamento (gancho)
    problem = confinement_problem(args.sem_isolamento)
    if problem:
        print(problem)
        return 1

    # ---------------------------------------------------------------- banco de notas
    db_url = course_db_url(ROOT, args.db)
    try:
        wait_for_db(db_url, wait=min(args.db_wait, 30.0))
    except DatabaseUnavailable as exc:
        print(f"Correção não iniciada: {exc}")
        return 1

    status: dict[tuple[str, str], str] = {}
    failures: list[tuple[str, str, str]] = []
    pairs: list[tuple[str, str]] = []
    for chapter in names:
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
            pairs.append((student, chapter))

    log_path = ROOT / "grading" / "autograde.log"
    log_path.parent.mkdir(exist_ok=True)
    started = time.perf_counter()
    registering = 0.0  # registrar no gradebook os capítulos que faltam (um gradebook novo: todos)
    results: list[TaskResult] = []
    logs = []
    if pairs:
        course_id = str(load_course_config(ROOT).CourseDirectory.course_id)
        try:
            prepare_gradebook(db_url, course_id, sorted({s for s, _ in pairs}))
            for chapter in sorted({c for _, c in pairs}):
                problem = register_assignment(ROOT, chapter, db_url)
                if problem:
                    print(problem)
                    return 1
            registering = time.perf_counter() - started
        except Exception as exc:  # noqa: BLE001 - o banco caiu entre a conferência e o preparo
            print(f"Correção não iniciada: o banco de notas ({describe_db(db_url)}) falhou: {exc}")
            return 1
        grade = grade_sequential if args.sequencial else grade_on_dask
        res, log = grade(pairs, args, db_url)
        results += res
        logs.append(log)
    wall = time.perf_counter() - started
    log_path.write_text("\n".join(logs))

    down = [r for r in results if r.db_down]
    if down:
        return database_failed(db_url, results, down)

    from sqlalchemy.exc import SQLAlchemyError

    try:
        read_scores(results, status, failures, db_url)
    except SQLAlchemyError as exc:  # o banco caiu depois da última tarefa
        print(f"\nCorreção interrompida: {db_unavailable_message(db_url, str(getattr(exc, 'orig', exc)))}")
        return 1
    export = run_nbgrader("export", f"--to={ROOT / 'grading' / 'notas.csv'}", cwd=ROOT, db_url=db_url)
    class_report = write_report()

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
    if results:
        mode = "sequencial" if args.sequencial else (args.scheduler or "LocalCluster")
        busy = sum(r.seconds for r in results)
        retried = sum(r.retries > 0 for r in results)
        print(
            f"\ntempo: {wall:.0f} s de relógio para {len(results)} entrega(s) ({mode}); "
            f"{busy / len(results):.1f} s por entrega dentro dos workers"
            + (
                f"; {registering:.0f} s do relógio registrando capítulos no gradebook"
                if registering >= 1
                else ""
            )
            + (f"; {retried} refeita(s) por erro de acesso ao banco" if retried else "")
        )
    print(
        f"banco de notas: {describe_db(db_url)}; log do nbgrader: {log_path.relative_to(ROOT)}; "
        "devolutivas: grading/feedback/; "
        + ("notas: grading/notas.csv" if export.returncode == 0 else "export falhou (veja o log)")
    )
    if class_report:
        print(f"relatório da turma: {class_report}")
    return 0


def write_report() -> str:
    """O relatório da turma (HTML + diagnosticos.csv) a partir dos vereditos; '' sem vereditos."""
    from transformer_course.instructor.report import write_class_report

    try:
        written = write_class_report(ROOT)
    except Exception as exc:  # noqa: BLE001 - o relatório não derruba as notas já gravadas
        print(f"\nO relatório da turma não foi escrito: {type(exc).__name__}: {exc}")
        return ""
    if written is None:
        return ""
    html_path, csv_path = written
    return f"{html_path.relative_to(ROOT)} (+ {csv_path.relative_to(ROOT)})"


if __name__ == "__main__":
    sys.exit(main())
