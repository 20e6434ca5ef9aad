"""Serviço de correção na entrega (``make grading-service``): o aluno envia, a devolutiva volta sozinha.

Vigia a área de troca do nbgrader (``c.Exchange.root``, a troca por sistema de arquivos) e, para
cada entrega nova (``nbgrader submit`` ou o botão *Submit* do JupyterLab):

1. recolhe a entrega daquele aluno (o ``collect`` do nbgrader, com ``--update``: a mais nova vale);
2. corrige num worker do Dask (``autograde`` + ``generate_feedback`` do nbgrader, a mesma tarefa
   de ``make grade-class``; ``LocalCluster`` embutido ou ``--scheduler tcp://HOST:8786``);
3. libera a devolutiva (``release_feedback`` do nbgrader): o aluno a busca com
   ``nbgrader fetch_feedback`` ou no JupyterLab (*Fetch Feedback*), em pt-BR.

O estado vem só da área de troca e da pasta do curso (nada em memória precisa sobreviver): uma
entrega está pronta quando a versão corrigida, a devolutiva e a devolutiva liberada correspondem à
entrega recolhida. Se o serviço cair no meio de um lote, ao voltar ele refaz só o que faltou.
Uma nova entrega do mesmo aluno é corrigida de novo (vale a mais nova, como no nbgrader). As notas
das questões abertas dadas no formgrader ficam no gradebook; ``nbgrader generate_feedback --force``
as inclui depois (o serviço não recorrige uma entrega que não mudou).

Para uma demonstração local, o serviço cria a área de troca (padrão ``grading/exchange``) e
publica os capítulos (``release_assignment``). Ctrl-C para com calma (as correções em andamento
são refeitas na próxima partida).

Uso: python scripts/grading_service.py [NN_nome ...] [--exchange PASTA] [--scheduler tcp://HOST:8786]
     [--workers N] [--db URL] [--intervalo S] [--timeout S]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import stat
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformer_course.course import CHAPTERS  # noqa: E402
from transformer_course.instructor.cluster import (  # noqa: E402
    DatabaseUnavailable,
    course_api,
    course_db_url,
    describe_db,
    grade_submission,
    newest_submissions,
    prepare_gradebook,
    quiet_worker,
    register_assignment,
    wait_for_db,
)
from transformer_course.instructor.nbgrader_run import nbgrader_env  # noqa: E402


def say(message: str) -> None:
    print(f"[{dt.datetime.now():%H:%M:%S}] {message}", flush=True)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _parse_ts(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    from nbgrader.utils import parse_utc

    try:
        return parse_utc(text)
    except Exception:  # noqa: BLE001 - carimbo ilegível: trata como ausente
        return None


class GradingService:
    """O laço do serviço: varre a troca, recolhe, manda corrigir no Dask, libera as devolutivas."""

    def __init__(self, args):
        self.args = args
        self.db_url = course_db_url(ROOT, args.db)
        self.exchange = str(Path(args.exchange).resolve())
        self.api = course_api(str(ROOT), self.db_url, args.timeout, self.exchange)
        self.course_id = self.api.coursedir.course_id
        self.inbound = Path(self.exchange) / self.course_id / "inbound"
        self.released = Path(self.exchange) / self.course_id / "feedback"
        self.in_flight: dict = {}  # future -> (aluno, capítulo, carimbo)
        self.failed: dict[tuple[str, str], str] = {}  # (aluno, capítulo) -> carimbo que falhou
        self.done: dict[tuple[str, str], str] = {}  # (aluno, capítulo) -> carimbo já corrigido e liberado
        self.known_students: set[str] = set()
        self.report_due = False  # há notas novas desde o último relatório da turma
        self.client = None
        self.cluster = None

    # ------------------------------------------------------------ preparo
    def setup(self, names: list[str]) -> None:
        # Isolamento (correção segura): sem bubblewrap, só com --sem-isolamento.
        from transformer_course.instructor.sandbox import require_sandbox

        require_sandbox(allow_unconfined=self.args.sem_isolamento)
        wait_for_db(self.db_url, wait=30)
        Path(self.exchange).mkdir(parents=True, exist_ok=True)
        # Troca por sistema de arquivos: todos escrevem, ninguém apaga o que é dos outros (como /tmp).
        os.chmod(self.exchange, 0o777 | stat.S_ISVTX)
        prepare_gradebook(self.db_url, self.course_id, [])
        for chapter in names:
            problem = register_assignment(ROOT, chapter, self.db_url)
            if problem:
                raise RuntimeError(problem)
            if not (Path(self.exchange) / self.course_id / "outbound" / chapter).is_dir():
                result = self.api.release_assignment(chapter)
                if not result["success"]:
                    raise RuntimeError(f"release_assignment {chapter} falhou:\n{result.get('error', '')}")
        self.inbound.mkdir(parents=True, exist_ok=True)
        self.client, self.cluster = self.open_client()
        workers = len(self.client.scheduler_info()["workers"])
        say(
            f"serviço de correção no ar: troca {self.exchange} (curso {self.course_id}), "
            f"{self.args.scheduler or 'LocalCluster embutido'} com {workers} worker(s), "
            f"banco {describe_db(self.db_url)}; capítulos: {', '.join(names)}. Ctrl-C para parar."
        )

    def open_client(self):
        import logging

        from distributed import Client, LocalCluster

        if self.args.scheduler:
            return Client(self.args.scheduler, timeout=30), None
        os.environ.update(nbgrader_env())
        cluster = LocalCluster(
            n_workers=self.args.workers or os.cpu_count() or 1,
            threads_per_worker=1,
            processes=True,
            memory_limit=0,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = Client(cluster)
        client.run(quiet_worker, str(ROOT / "grading" / "dask-workers.log"))
        return client, cluster

    # ------------------------------------------------------------ estado (troca + pasta do curso)
    def newest_submissions(self) -> dict[tuple[str, str], tuple[dt.datetime, str]]:
        """(aluno, capítulo) -> (carimbo, pasta) da entrega mais nova e completa na troca."""
        return newest_submissions(self.inbound)

    def folder(self, kind: str, student: str, chapter: str) -> Path:
        directory = getattr(self.api.coursedir, f"{kind}_directory")
        return Path(self.api.coursedir.format_path(directory, student, chapter))

    def stage(self, student: str, chapter: str) -> str:
        """Em que passo está a entrega recolhida: 'corrigir', 'liberar' ou 'pronta'.

        A devolutiva é o último arquivo que uma tarefa escreve (depois do ``autograde``, cujas notas
        já estão no gradebook): se ela existe para o carimbo desta entrega, a correção terminou. Uma
        tarefa interrompida antes disso é refeita do zero (o nbgrader sobrescreve a mesma entrega).
        """
        from nbgrader.utils import notebook_hash

        submitted = self.folder("submitted", student, chapter)
        stamp = _read(submitted / "timestamp.txt")
        feedback = self.folder("feedback", student, chapter)
        if not (feedback / f"{chapter}.html").exists() or _read(feedback / "timestamp.txt") != stamp:
            return "corrigir"
        secret = _read(submitted / "submission_secret.txt")
        released = (
            self.released / f"{notebook_hash(secret=secret, notebook_id=chapter)}.html" if secret else None
        )
        return "pronta" if released is not None and released.exists() else "liberar"

    def stamp(self, student: str, chapter: str) -> str | None:
        return _read(self.folder("submitted", student, chapter) / "timestamp.txt")

    def collect(self, student: str, chapter: str) -> dict:
        from nbgrader.utils import capture_log, temp_attrs

        with temp_attrs(self.api.coursedir, assignment_id=chapter, student_id=student):
            app = self.api.exchange.Collect(
                coursedir=self.api.coursedir, authenticator=self.api.authenticator, parent=self.api
            )
            app.update = True
            return capture_log(app)

    # ------------------------------------------------------------ uma volta do laço
    def poll(self) -> None:
        busy = {(s, c) for s, c, _ in self.in_flight.values()}
        for (student, chapter), (when, _name) in sorted(self.newest_submissions().items()):
            if (student, chapter) in busy:
                continue  # a nova entrega entra na próxima volta, depois desta correção
            submitted = self.folder("submitted", student, chapter)
            collected = _parse_ts(_read(submitted / "timestamp.txt"))
            if collected is None or when > collected:
                result = self.collect(student, chapter)
                if not result["success"]:
                    say(f"{student} / {chapter}: recolher falhou: {result.get('error', '')[-300:]}")
                    continue
                say(f"{student} / {chapter}: entrega recolhida ({when:%H:%M:%S} UTC)")
            stamp = _read(submitted / "timestamp.txt") or ""
            if self.failed.get((student, chapter)) == stamp:
                continue  # já falhou com esta mesma entrega: espera uma nova
            stage = self.stage(student, chapter)
            if stage == "pronta":
                self.done[student, chapter] = stamp
                continue
            if self.done.get((student, chapter)) == stamp:
                # Já corrigida por este serviço e a entrega não mudou: quem mexe na devolutiva agora é o
                # professor (``generate_feedback --force`` apaga e refaz a pasta); não recorrige.
                continue
            if stage == "liberar":
                self.release(student, chapter, when)
                continue
            if student not in self.known_students:
                prepare_gradebook(self.db_url, self.course_id, [student])
                self.known_students.add(student)
            future = self.client.submit(
                grade_submission,
                str(ROOT),
                chapter,
                student,
                self.db_url,
                force=True,
                timeout=self.args.timeout,
                db_wait=self.args.db_wait,
                key=f"servico-{chapter}-{student}-{time.time_ns()}",
                pure=False,
            )
            self.in_flight[future] = (student, chapter, when)
            say(f"{student} / {chapter}: corrigindo")
        for future in [f for f in self.in_flight if f.done()]:
            student, chapter, when = self.in_flight.pop(future)
            try:
                result = future.result()
            except Exception as exc:  # noqa: BLE001 - KilledWorker etc.: os outros seguem
                result = None
                reason = f"{type(exc).__name__}: {exc}"
            else:
                reason = result.reason
            if result is not None and result.withheld:
                self.failed[student, chapter] = self.stamp(student, chapter)
                say(f"{student} / {chapter}: devolutiva retida (não liberada): {result.withheld}")
                continue
            if result is None or not result.ok:
                self.failed[student, chapter] = self.stamp(student, chapter)
                say(f"{student} / {chapter}: NÃO corrigida: {reason}")
                continue
            self.release(student, chapter, when)
            self.report_due = True
        if self.report_due and not self.in_flight:
            self.write_report()

    def write_report(self) -> None:
        """O relatório da turma (HTML + diagnosticos.csv), refeito quando as correções em curso acabam."""
        from transformer_course.instructor.report import write_class_report

        self.report_due = False
        try:
            written = write_class_report(ROOT)
        except Exception as exc:  # noqa: BLE001 - o relatório não para o serviço
            say(f"o relatório da turma não foi escrito: {type(exc).__name__}: {exc}")
            return
        if written:
            say(f"relatório da turma atualizado: {written[0].relative_to(ROOT)}")

    def release(self, student: str, chapter: str, when: dt.datetime) -> None:
        result = self.api.release_feedback(chapter, student)
        if not result["success"]:
            say(f"{student} / {chapter}: liberar a devolutiva falhou: {result.get('error', '')[-300:]}")
            return
        self.done[student, chapter] = self.stamp(student, chapter)
        score = ""
        try:
            with self.api.gradebook as gb:
                sub = gb.find_submission(chapter, student)
                score = f"{sub.code_score:g}/{sub.max_code_score:g} pontos automáticos; "
        except Exception:  # noqa: BLE001 - só para a mensagem
            pass
        latency = (dt.datetime.now(dt.timezone.utc) - when.astimezone(dt.timezone.utc)).total_seconds()
        say(f"{student} / {chapter}: {score}devolutiva liberada {latency:.0f} s após a entrega")

    def close(self) -> None:
        if self.in_flight:
            say(f"{len(self.in_flight)} correção(ões) em andamento será(ão) refeita(s) na próxima partida")
            for future in self.in_flight:
                future.cancel()
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="capítulos publicados e vigiados (padrão: todos)")
    parser.add_argument(
        "--exchange",
        default=str(ROOT / "grading" / "exchange"),
        help="raiz da área de troca do nbgrader, c.Exchange.root (padrão: grading/exchange)",
    )
    parser.add_argument("--db", default=None, help="banco de notas (padrão: o do nbgrader_config.py)")
    parser.add_argument("--db-wait", type=float, default=120.0, help="espera pelo banco, se ele cair (s)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--scheduler", default=None, help="cluster Dask existente (tcp://HOST:8786)")
    where.add_argument("--workers", type=int, default=None, help="workers do LocalCluster (padrão: núcleos)")
    parser.add_argument(
        "--intervalo", type=float, default=2.0, help="segundos entre duas varreduras da troca"
    )
    parser.add_argument("--timeout", type=int, default=None, help="limite por célula em segundos")
    parser.add_argument(
        "--sem-isolamento",
        action="store_true",
        help="aceita corrigir sem o kernel confinado onde o isolamento não existe (arriscado)",
    )
    args = parser.parse_args(argv)

    available = [c for c in CHAPTERS if (ROOT / "release" / c).is_dir()]
    unknown = sorted(set(args.chapters) - set(available))
    if unknown:
        print(f"capítulos desconhecidos: {', '.join(unknown)}; disponíveis: {', '.join(available)}")
        return 2
    names = args.chapters or available

    # SIGTERM (systemd, docker stop) para com calma, como o Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    service = GradingService(args)
    try:
        service.setup(names)
        while True:
            service.poll()
            time.sleep(args.intervalo)
    except KeyboardInterrupt:
        say("parando o serviço de correção (Ctrl-C)")
        service.close()
        say("serviço parado")
        return 0
    except (DatabaseUnavailable, RuntimeError) as exc:  # inclui SandboxUnavailable
        say(f"o serviço não pôde continuar: {exc}")
        service.close()
        return 1


if __name__ == "__main__":
    sys.exit(main())
