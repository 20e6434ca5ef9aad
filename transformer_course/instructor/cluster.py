"""Correção da turma num cluster Dask: a tarefa de uma entrega e o preparo do gradebook.

Uma tarefa = um aluno × um capítulo. Ela roda no *worker* do Dask (um processo de longa duração),
dentro do próprio processo, pela API Python do nbgrader (:class:`nbgrader.apps.api.NbGraderAPI`):
``autograde`` e ``generate_feedback`` do nbgrader para aquela entrega. A configuração vem do
``nbgrader_config.py`` do curso (carregado pelo caminho, não pela pasta atual do worker), então o
isolamento do kernel, os tempos-limite e os modelos das devolutivas são os mesmos do
``nbgrader autograde`` de linha de comando. O nbgrader é importado e configurado uma vez por worker.

Usado por ``scripts/grade_class.py`` (``make grade-class``) e pelo serviço de correção
(``scripts/grading_service.py``).
"""

from __future__ import annotations

import os
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .faults import fault_in_log

# ====================================================================== o banco de notas


def normalize_db_url(url: str) -> str:
    """``postgresql://...`` vira ``postgresql+psycopg://...`` (o driver psycopg 3 no SQLAlchemy)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def describe_db(url: str) -> str:
    """O banco em palavras, sem senha: ``PostgreSQL aluno@127.0.0.1:5432/notas`` ou o arquivo SQLite."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return f"SQLite {parsed.database}"
    user = f"{parsed.username}@" if parsed.username else ""
    port = f":{parsed.port}" if parsed.port else ""
    return f"PostgreSQL {user}{parsed.host or 'localhost'}{port}/{parsed.database}"


def course_db_url(root: Path, db: str | None = None) -> str:
    """O ``db_url`` da correção: ``db`` (``--db``) ou o do ``nbgrader_config.py`` do curso."""
    if db:
        return normalize_db_url(db)
    return normalize_db_url(str(load_course_config(root).CourseDirectory.db_url))


class DatabaseUnavailable(RuntimeError):
    """O banco de notas não respondeu (mensagem em pt-BR com o nome do banco)."""


def _db_detail(text: str) -> str:
    """A linha do erro do driver (``connection to server ... failed: Connection refused``), se houver.

    O nbgrader embrulha qualquer erro do banco num conselho enganoso ("rode ``nbgrader db upgrade``");
    essa linha nunca é o detalhe.
    """
    lines = [
        ln.strip()
        for ln in text.splitlines()
        if ln.strip() and "error accessing the nbgrader database" not in ln
    ]
    driver = [ln for ln in lines if "OperationalError" in ln or "connection to server" in ln]
    line = (driver or lines or [""])[-1]
    return re.sub(r"^(sqlalchemy\.exc\.\w+: )?(\(\w+(\.\w+)*\) )?", "", line)


def db_unavailable_message(url: str, detail: str = "") -> str:
    """A mensagem em pt-BR de banco fora do ar: nome do banco (sem senha) e a última linha do erro."""
    from sqlalchemy.engine import make_url

    detail = _db_detail(detail)[:300]
    password = make_url(url).password
    if password:
        detail = detail.replace(str(password), "***")
    return (
        f"o banco de notas ({describe_db(url)}) não está acessível"
        + (f": {detail}" if detail else "")
        + ". Confira se o servidor está no ar e se o endereço de --db está certo; nenhuma nota parcial "
        "foi gravada para as entregas que não puderam ser corrigidas (rode de novo quando o banco voltar)."
    )


def wait_for_db(url: str, wait: float = 0.0) -> None:
    """Conecta ao banco (tentando por até ``wait`` segundos); :class:`DatabaseUnavailable` se não der."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import OperationalError

    deadline = time.monotonic() + wait
    delay = 0.5
    while True:
        engine = create_engine(url)
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            return
        except OperationalError as exc:
            if time.monotonic() >= deadline:
                raise DatabaseUnavailable(db_unavailable_message(url, str(exc.orig or exc))) from None
        finally:
            engine.dispose()
        time.sleep(delay)
        delay = min(delay * 2, 5.0)


def register_assignment(root: Path, chapter: str, db_url: str) -> str | None:
    """Registra o capítulo no gradebook se faltar (``generate_assignment`` do nbgrader, pasta temporária).

    Roda pela API do nbgrader neste processo (a partida do nbgrader é paga uma vez para todos os
    capítulos: 7 capítulos num gradebook novo em ~9 s, contra ~27 s com um ``nbgrader
    generate_assignment`` por capítulo). Devolve o erro do nbgrader, ou None. Não toca em ``release/``.
    """
    import tempfile

    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.apps.api import NbGraderAPI

    _environment()
    with Gradebook(db_url) as gb:
        try:
            if gb.find_assignment(chapter).notebooks:
                return None
        except MissingEntry:
            pass
    with tempfile.TemporaryDirectory() as tmp:
        config = load_course_config(
            Path(root),
            **{
                "CourseDirectory.root": str(root),
                "CourseDirectory.db_url": db_url,
                "CourseDirectory.release_directory": tmp,
            },
        )
        result = NbGraderAPI(config=config).generate_assignment(chapter, force=True, create=True)
    if result["success"]:
        return None
    log = result.get("log") or result.get("error") or ""
    return f"nbgrader generate_assignment {chapter} falhou:\n{log[-2000:]}"


def prepare_gradebook(url: str, course_id: str, students: list[str]) -> None:
    """Cria as tabelas e os alunos ANTES de espalhar as tarefas (duas tarefas nunca criam a mesma linha)."""
    from nbgrader.api import Gradebook

    with Gradebook(url, course_id) as gb:
        for student in students:
            gb.update_or_create_student(student)


# ====================================================================== a área de troca


def newest_submissions(inbound: Path) -> dict:
    """(aluno, capítulo) -> (carimbo, pasta) da entrega mais nova e **completa** em ``inbound``.

    O ``nbgrader submit`` cria a pasta ``aluno+capítulo+carimbo+aleatório``, copia o notebook e só
    então escreve ``timestamp.txt`` e, por último, ``submission_secret.txt``. Uma pasta sem esse
    último arquivo ainda está sendo copiada: recolhê-la agora pegaria um notebook pela metade
    ("não é um JSON válido") ou nenhum. Ela entra numa volta seguinte do serviço.
    """
    from nbgrader.utils import parse_utc

    newest: dict = {}
    for entry in inbound.iterdir() if inbound.is_dir() else []:
        parts = entry.name.rsplit("+", 3)
        if len(parts) < 3 or not entry.is_dir() or not (entry / "submission_secret.txt").is_file():
            continue
        student, chapter = parts[0], parts[1]
        try:
            when = parse_utc(parts[2])
        except Exception:  # noqa: BLE001 - nome estranho na troca: ignora
            continue
        if (student, chapter) not in newest or when > newest[student, chapter][0]:
            newest[student, chapter] = (when, entry.name)
    return newest


# ====================================================================== a tarefa de uma entrega


def load_course_config(root: Path, **overrides):
    """O ``nbgrader_config.py`` de ``root``, carregado pelo caminho, mais ``Classe.traço = valor``."""
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    extra = Config()
    for key, value in overrides.items():
        section, trait = key.split(".")
        extra[section][trait] = value
    config.merge(extra)
    return config


_APIS: dict[tuple, object] = {}
_LOCK = threading.Lock()


def course_api(root: str, db_url: str, timeout: int | None = None, exchange: str | None = None):
    """Uma :class:`NbGraderAPI` por worker e configuração (o custo de partida do nbgrader é pago uma vez)."""
    key = (root, db_url, timeout, exchange)
    with _LOCK:
        api = _APIS.get(key)
        if api is None:
            from nbgrader.apps.api import NbGraderAPI

            overrides = {"CourseDirectory.root": root, "CourseDirectory.db_url": db_url}
            if timeout:
                overrides["Execute.timeout"] = timeout
            if exchange:
                overrides["Exchange.root"] = exchange
            config = load_course_config(Path(root), **overrides)
            config.Autograde.autograde_preprocessors = atomic_preprocessors(
                config.Autograde.get("autograde_preprocessors")
            )
            api = NbGraderAPI(config=config)
            _APIS[key] = api
        return api


SAVE_AUTOGRADES = "nbgrader.preprocessors.SaveAutoGrades"
ATOMIC_SAVE_AUTOGRADES = "transformer_course.instructor.cluster.AtomicSaveAutoGrades"


def atomic_preprocessors(preprocessors) -> list:
    """A lista do ``Autograde`` com o ``SaveAutoGrades`` trocado por :class:`AtomicSaveAutoGrades`.

    Sem lista no ``nbgrader_config.py``, parte da lista padrão do nbgrader.
    """
    if preprocessors is None:
        from nbgrader.converters.autograde import Autograde

        preprocessors = Autograde.autograde_preprocessors.default_value
    out = []
    for item in preprocessors:
        name = item if isinstance(item, str) else f"{item.__module__}.{item.__qualname__}"
        if name in (SAVE_AUTOGRADES, "nbgrader.preprocessors.saveautogrades.SaveAutoGrades"):
            item = ATOMIC_SAVE_AUTOGRADES
        out.append(item)
    return out


def _atomic_save_autogrades():
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import NbGraderPreprocessor, SaveAutoGrades

    class AtomicSaveAutoGrades(SaveAutoGrades):
        """O ``SaveAutoGrades`` do nbgrader numa transação só por notebook.

        O original faz um ``commit`` por célula: se o banco cai no meio, a entrega fica no gradebook
        com parte das notas (uma nota parcial que parece final). Aqui os ``commit`` de cada célula
        viram ``flush`` (a mesma transação) e há um ``commit`` no fim: ou todas as notas do notebook
        entram, ou nenhuma (o PostgreSQL e o SQLite desfazem a transação interrompida).
        """

        def preprocess(self, nb, resources):
            info = resources["nbgrader"]
            self.notebook_id = info["notebook"]
            self.assignment_id = info["assignment"]
            self.student_id = info["student"]
            self.db_url = info["db_url"]
            self.gradebook = Gradebook(self.db_url)
            with self.gradebook:
                session = self.gradebook.db
                session.commit = session.flush  # as células escrevem na mesma transação
                try:
                    nb, resources = NbGraderPreprocessor.preprocess(self, nb, resources)
                finally:
                    del session.commit
                session.commit()
            return nb, resources

    AtomicSaveAutoGrades.__module__ = __name__
    AtomicSaveAutoGrades.__qualname__ = "AtomicSaveAutoGrades"
    return AtomicSaveAutoGrades


def __getattr__(name: str):
    # A classe só existe quando pedida (o traitlets a importa pelo nome): importar este módulo não
    # importa o nbgrader.
    factories = {"AtomicSaveAutoGrades": _atomic_save_autogrades, "IgnoreInterrupt": _ignore_interrupt_plugin}
    if name in factories:
        cls = factories[name]()
        globals()[name] = cls
        return cls
    raise AttributeError(name)


def _environment() -> None:
    # O nbgrader chama `alembic` pelo PATH, e o kernel deve ser o deste Python.
    bindir = os.path.dirname(sys.executable)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ.setdefault("PYTHONWARNINGS", "ignore")


def quiet_worker(log_file: str) -> int:
    """Manda o stderr do worker para ``log_file``; devolve o pid.

    Para o ``LocalCluster`` embutido: sem isso, os avisos do nbgrader e do SQLAlchemy cairiam no
    terminal do instrutor, no meio da barra de progresso. Os kernels confinados não herdam este
    stderr (o deles é um pipe do gerenciador de kernels: veja :mod:`.sandbox`).
    """
    fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    return os.getpid()


def ignore_interrupt() -> int:
    """O worker ignora o SIGINT (o Ctrl-C do terminal vai ao grupo de processos inteiro).

    Quem para a correção é o serviço (ou o ``grade_class``): ele cancela as tarefas e fecha o
    cluster; um worker que levasse o Ctrl-C no meio do ``autograde`` teria o ``KeyboardInterrupt``
    engolido pelo ``capture_log`` do nbgrader (um ``except:`` sem tipo) e a entrega sairia como
    "não corrigida" por culpa do corretor. Devolve o pid.
    """
    import signal

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return os.getpid()


def _ignore_interrupt_plugin():
    from distributed import WorkerPlugin

    class IgnoreInterrupt(WorkerPlugin):
        """:func:`ignore_interrupt` em todo worker, também nos que o nanny reinicia."""

        name = "ignora-ctrl-c"

        def setup(self, worker):
            ignore_interrupt()

    IgnoreInterrupt.__module__ = __name__
    IgnoreInterrupt.__qualname__ = "IgnoreInterrupt"
    return IgnoreInterrupt


@dataclass
class TaskResult:
    """O que uma tarefa devolve ao instrutor (nada de objetos do nbgrader: só texto e números)."""

    student: str
    chapter: str
    ok: bool
    reason: str = ""
    log: str = ""
    seconds: float = 0.0
    worker: str = ""
    retries: int = 0
    skipped: bool = False
    feedback: bool = False
    withheld: str = ""  # a devolutiva continha material do professor e não foi publicada
    db_down: bool = False  # o banco de notas não respondeu (dentro do prazo --db-wait)
    grader_fault: str = ""  # falha do corretor, não da entrega (faults.GraderFault): nada gravado
    extra: dict = field(default_factory=dict)


def _text(result: dict) -> str:
    return "\n".join(part for part in (result.get("log", ""), result.get("error", "")) if part)


def _db_error(text: str) -> bool:
    return any(
        marker in text
        for marker in (
            "OperationalError",
            "sqlalchemy.exc.InterfaceError",
            "PendingRollbackError",
            "database is locked",
            "error accessing the nbgrader database",
        )
    )


def failure_reason(log: str) -> str:
    """O motivo, em pt-BR, pelo qual o nbgrader não corrigiu uma entrega (a partir do log dela)."""
    if "became unresponsive" in log or "UnresponsiveKernelError" in log:
        return (
            "o kernel não respondeu nem à interrupção (um laço que ignora Ctrl-C, ou memória "
            "esgotada): o nbgrader desistiu desta entrega"
        )
    if "NotJSONError" in log:
        return "o notebook não é um JSON válido"
    if "DeadKernelError" in log or "Kernel died" in log:
        return "o kernel morreu durante a execução (memória esgotada? os._exit?)"
    if "CellTimeoutError" in log or "Cell execution timed out" in log:
        return "tempo esgotado numa célula (laço infinito?)"
    for line in reversed(log.splitlines()):
        stripped = line.strip()
        if stripped and not stripped.startswith(("File ", "^", "[")) and ":" in stripped:
            return f"erro do nbgrader: {stripped[:300]}"
    return "o nbgrader não gerou a versão corrigida"


def drop_ungraded_submission(db_url: str, chapter: str, student: str) -> None:
    """Tira do gradebook a entrega que o ``autograde`` abriu e não chegou a corrigir.

    O nbgrader cria a entrega (e as linhas das notas, sem nota automática) antes de executar o
    notebook; o ``nbgrader export`` a exportaria com 0. Uma entrega que já tinha notas de uma
    correção anterior fica como estava (as notas gravadas continuam valendo).
    """
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url) as gb:
        try:
            sub = gb.find_submission(chapter, student)
        except MissingEntry:
            return
        graded = any(
            g.auto_score is not None or g.manual_score is not None for nb in sub.notebooks for g in nb.grades
        )
        if not graded:
            gb.remove_submission(chapter, student)


def stop_requested(stop_event: str | None) -> bool:
    """O instrutor mandou parar (o ``distributed.Event`` ``stop_event`` está marcado)?"""
    if not stop_event:
        return False
    try:
        from distributed import Event

        return Event(stop_event).is_set()
    except Exception:  # noqa: BLE001 - fora de um worker do Dask: nunca há pedido de parada
        return False


def grade_submission(
    root: str,
    chapter: str,
    student: str,
    db_url: str,
    *,
    force: bool = False,
    timeout: int | None = None,
    feedback: bool = True,
    db_wait: float = 120.0,
    exchange: str | None = None,
    stop_event: str | None = None,
) -> TaskResult:
    """Uma tarefa do Dask: ``autograde`` + ``generate_feedback`` do nbgrader para um aluno e capítulo.

    Nunca levanta exceção por causa da entrega: devolve :class:`TaskResult` com ``ok=False`` e o
    motivo. Um erro de acesso ao banco (SQLite travado, PostgreSQL reiniciando) é tentado de novo
    por até ``db_wait`` segundos, contados do primeiro erro; o nbgrader refaz a entrega do zero a
    cada tentativa (a linha da entrega no gradebook é a mesma: ``update_or_create_submission``).
    Se o banco não volta no prazo, ``db_down=True`` e nada fica pela metade: as notas de um
    notebook entram numa transação só (:class:`AtomicSaveAutoGrades`), o nbgrader apaga a pasta
    corrigida da tentativa que falhou e a marca em ``grading/.em_andamento/`` fica, para a próxima
    execução refazer a entrega inteira.

    ``stop_event``: nome de um ``distributed.Event``; marcado (o instrutor já sabe que o banco caiu),
    a tarefa volta sem tocar em nada, em vez de esperar o banco mais ``db_wait`` segundos.
    """
    _environment()
    started = time.perf_counter()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    if stop_requested(stop_event):
        return TaskResult(
            student,
            chapter,
            ok=False,
            reason=db_unavailable_message(db_url, "correção não iniciada: o banco já tinha caído"),
            worker=worker,
            db_down=True,
        )
    api = course_api(root, db_url, timeout, exchange)
    graded = Path(api.coursedir.format_path(api.coursedir.autograded_directory, student, chapter))
    retries = 0

    def retrying(call):
        # Um erro de acesso ao banco é tentado de novo por até db_wait segundos a partir do primeiro
        # erro; o nbgrader refaz o passo inteiro.
        nonlocal retries
        delay = 1.0
        deadline = None
        while True:
            with _LOCK:
                result = call()
            text = _text(result)
            if result["success"] or not _db_error(text):
                return result, text
            if deadline is None:
                deadline = time.monotonic() + db_wait
            if time.monotonic() >= deadline:
                return result, text
            retries += 1
            time.sleep(min(delay, max(deadline - time.monotonic(), 0.1)))
            delay = min(delay * 2, 10.0)

    # Uma tentativa interrompida (worker morto no meio da tarefa, banco fora do ar) deixa a pasta
    # corrigida pela metade, ou a nota no gradebook sem a pasta; o nbgrader pularia a entrega
    # ("Skipping existing assignment") e a nota sairia de um notebook não executado. A marca abaixo
    # só some quando o autograde termina: se ela existe no começo, a tentativa anterior foi
    # interrompida e esta refaz tudo.
    marker = Path(root) / "grading" / ".em_andamento" / f"{student}__{chapter}"
    interrupted = marker.exists()
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    redo = force or interrupted
    result, text = retrying(lambda: api.autograde(chapter, student, force=redo, create=True))
    log = text
    out = TaskResult(student, chapter, ok=False, worker=worker)
    out.skipped = "Skipping existing assignment" in text
    finished = True  # o autograde chegou ao fim (bem ou mal, por causa da entrega)
    if not result["success"] and _db_error(text):
        out.reason = db_unavailable_message(db_url, text)
        out.db_down = True
        finished = False
        # O nbgrader já apaga a pasta da tentativa que falhou; se sobrou o notebook, sai também
        # (nada de versão corrigida com aparência de pronta sem as notas no banco).
        (graded / f"{chapter}.ipynb").unlink(missing_ok=True)
    elif fault_in_log(text) is not None:
        # Falha do corretor (o kernel não partiu, não importa o pacote do curso, o juiz quebrou):
        # nada gravado, e a marca fica para a próxima execução refazer a entrega.
        out.grader_fault = fault_in_log(text) or "falha do corretor"
        out.reason = f"não corrigida por uma falha do corretor, não da entrega: {out.grader_fault}"
        finished = False
        (graded / f"{chapter}.ipynb").unlink(missing_ok=True)
        with _LOCK:
            drop_ungraded_submission(db_url, chapter, student)
    elif not (graded / f"{chapter}.ipynb").exists():
        out.reason = failure_reason(text) + " (veja grading/autograde.log)"
    else:
        out.ok = True
        if feedback:
            fb, fb_text = retrying(
                lambda: api.generate_feedback(chapter, student, force=redo or not out.skipped)
            )
            log += "\n" + fb_text
            out.feedback = fb["success"]
            if not fb["success"] and _db_error(fb_text):
                # As notas estão completas no banco; só a devolutiva falta (a próxima execução a gera).
                out.db_down = True
                out.reason = db_unavailable_message(db_url, fb_text)
            # Segunda camada do isolamento: uma devolutiva com soluções ou testes ocultos não sai.
            from .sandbox import withhold_leaky_feedback

            out.withheld = withhold_leaky_feedback(root, chapter, [student]).get(student, "")
    out.retries = retries
    out.log = log
    out.seconds = time.perf_counter() - started
    if finished:
        marker.unlink(missing_ok=True)
    return out


def floor_cost() -> float:
    """O piso do custo de um notebook: partir um kernel e ``import torch`` nele (segundos)."""
    from jupyter_client.manager import start_new_kernel

    _environment()
    started = time.perf_counter()
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        kc.execute_interactive("import torch", timeout=120)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return time.perf_counter() - started
