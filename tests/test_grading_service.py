"""O serviço de correção na entrega (``scripts/grading_service.py``), com alunos de verdade.

A área de troca do nbgrader fica numa pasta temporária; o aluno usa os comandos do nbgrader
(``fetch_assignment``, ``submit``, ``fetch_feedback``) com o ``course_id`` do curso. O serviço
recolhe, corrige no Dask, libera a devolutiva em pt-BR; uma nova entrega é corrigida de novo (vale a
mais nova); a nota de uma questão aberta dada pelo professor sobrevive à devolutiva refeita; Ctrl-C
para o serviço sem deixar processos. E, com processos de verdade: o serviço morto com SIGKILL no
meio de um lote volta e termina o lote sem perder nem recorrigir nada.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest
from conftest import BIN, ROOT
from test_grading_parallel import CHAPTER, class_submissions, make_class

pytestmark = pytest.mark.slow

COURSE_ID = "transformers-do-zero"


def _stop_bound() -> tuple[float, float]:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import grading_service
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return grading_service.STOP_BOUND, grading_service.KILL_GRACE


STOP_BOUND, KILL_GRACE = _stop_bound()

# O serviço parte com o SIGINT IGNORADO, como o herda quem é iniciado em segundo plano por um shell
# sem controle de jobs (``comando &`` num script, o ``make test`` do CI): foi assim que o Ctrl-C
# deixou de parar o serviço no CI (o Python só arma o ``KeyboardInterrupt`` se o SIGINT chega no
# padrão). O Ctrl-C tem de funcionar do mesmo jeito em qualquer terminal.
SIGINT_IGNORED = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


class Service:
    """O serviço num grupo de processos próprio, com a saída lida numa thread."""

    def __init__(self, course: Path, exchange: Path, *extra: str):
        self.course, self.exchange = course, exchange
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                SIGINT_IGNORED,
                str(course / "scripts" / "grading_service.py"),
                CHAPTER,
                f"--exchange={exchange}",
                "--intervalo=0.5",
                *extra,
            ],
            cwd=course,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.wait_for("serviço de correção no ar", timeout=300)

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def count(self, pattern: str) -> int:
        return len(re.findall(pattern, self.output))

    def wait_for(self, pattern: str, times: int = 1, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while self.count(pattern) < times:
            if self.proc.poll() is not None and not self.reader.is_alive():
                raise AssertionError(f"o serviço saiu (código {self.proc.returncode}):\n{self.output}")
            if time.monotonic() > deadline:
                raise AssertionError(f"esperando {pattern!r} x{times}:\n{self.output}")
            time.sleep(0.2)

    def group_alive(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def descendants(self):
        import psutil

        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def kernels(self):
        """Os kernels que os workers do serviço abriram (processos ``ipykernel``)."""
        found = []
        for proc in self.descendants():
            try:
                if any("ipykernel" in part for part in proc.cmdline()):
                    found.append(proc)
            except Exception:  # noqa: BLE001 - o processo acabou de sair
                pass
        return found

    def ctrl_c(self) -> float:
        """Manda o SIGINT, espera a saída (código 0) e devolve o tempo que o próprio serviço mediu."""
        self.proc.send_signal(signal.SIGINT)
        assert self.proc.wait(timeout=300) == 0, self.output
        self.reader.join(timeout=10)
        found = re.findall(r"serviço parado em ([\d.]+) s", self.output)
        assert found, self.output
        return float(found[-1])

    def kill_group(self) -> None:
        if self.group_alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)


def student(home: Path, exchange: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    """Um comando do nbgrader como o aluno ``name`` (a troca e o course_id do curso, nada mais)."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(HOME=str(home), PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    run = subprocess.run(
        [
            str(BIN / "nbgrader"),
            *args,
            f"--Exchange.root={exchange}",
            f"--Exchange.cache={home / '.cache-nbgrader'}",
            f"--CourseDirectory.course_id={COURSE_ID}",
            f"--student={name}",
        ],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"nbgrader {' '.join(args)} ({name}):\n{run.stdout}\n{run.stderr}"
    return run


def submit(home: Path, exchange: Path, name: str, nb) -> None:
    if not (home / CHAPTER).is_dir():
        student(home, exchange, name, "fetch_assignment", CHAPTER)
    nbformat.write(nb, home / CHAPTER / f"{CHAPTER}.ipynb")
    student(home, exchange, name, "submit", CHAPTER)


def fetched_feedback(home: Path, exchange: Path, name: str) -> list[str]:
    student(home, exchange, name, "fetch_feedback", CHAPTER)
    pages = sorted((home / CHAPTER / "feedback").glob(f"*/{CHAPTER}.html"))
    return [re.sub(r"<[^>]+>", " ", p.read_text()) for p in pages]


def auto_score(course: Path, name: str) -> float:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        sub = gb.find_submission(CHAPTER, name)
        return sum(g.score or 0 for nb in sub.notebooks for g in nb.grades if g.cell_type == "code")


def test_submit_feedback_resubmit_manual_grade_and_ctrl_c(tmp_path):
    subs = class_submissions()
    course = tmp_path / "curso"
    make_class(course, {})
    exchange = tmp_path / "troca"
    home = tmp_path / "casa" / "ana"
    service = Service(course, exchange, "--workers=1")
    try:
        # 1. Entrega em branco: nota 0, devolutiva em pt-BR sem os testes ocultos.
        submit(home, exchange, "ana", subs["carla"][0])
        service.wait_for(r"ana / 02_atencao: .*devolutiva liberada")
        pages = fetched_feedback(home, exchange, "ana")
        assert len(pages) == 1, pages
        assert "Nota:" in pages[0] and "não implementou" in pages[0]
        assert "BEGIN HIDDEN TESTS" not in pages[0] and "_hidden(" not in pages[0]
        assert auto_score(course, "ana") == 0

        # 2. Nova entrega, agora certa: corrigida de novo, vale a mais nova.
        submit(home, exchange, "ana", subs["ana"][0])
        service.wait_for(r"ana / 02_atencao: .*devolutiva liberada", times=2)
        pages = fetched_feedback(home, exchange, "ana")
        assert len(pages) == 2, "a segunda devolutiva não chegou"
        assert "não implementou" not in pages[-1]
        assert auto_score(course, "ana") == pytest.approx(subs["ana"][1])

        # 3. O professor dá nota a uma questão aberta (como o formgrader) e refaz a devolutiva.
        from nbgrader.api import Gradebook

        db = f"sqlite:///{course / 'grading' / 'gradebook.db'}"
        with Gradebook(db) as gb:
            nb = gb.find_submission_notebook(CHAPTER, CHAPTER, "ana")
            manual = {g.name: g.max_score for g in nb.grades if g.cell_type == "markdown"}
            assert manual, "o capítulo 2 não tem questão aberta?"
            for grade in nb.grades:
                if grade.name in manual:
                    grade.manual_score = grade.max_score
                    grade.needs_manual_grade = False
            gb.db.commit()
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
        for args in (("generate_feedback", "--force"), ("release_feedback",)):
            run = subprocess.run(
                [str(BIN / "nbgrader"), args[0], CHAPTER, *args[1:], f"--Exchange.root={exchange}"],
                cwd=course,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert run.returncode == 0, run.stderr
        pages = fetched_feedback(home, exchange, "ana")
        assert "a corrigir" not in pages[-1], "a nota da questão aberta não entrou na devolutiva"
        # Enquanto o professor refaz a devolutiva, a pasta dela some por um momento: algumas voltas do
        # serviço nesse estado não podem recorrigir a entrega (ela não mudou).
        folder = course / "grading" / "feedback" / "ana" / CHAPTER
        folder.rename(folder.with_name("refazendo"))
        time.sleep(3)
        folder.with_name("refazendo").rename(folder)
        time.sleep(1)
        assert service.count(r"ana / 02_atencao: corrigindo") == 2, service.output
        with Gradebook(db) as gb:
            nb = gb.find_submission_notebook(CHAPTER, CHAPTER, "ana")
            assert {g.name: g.manual_score for g in nb.grades if g.name in manual} == manual

        # 4. Ctrl-C (ocioso): para dentro do limite, código 0, sem processos sobrando.
        assert service.ctrl_c() <= STOP_BOUND + KILL_GRACE, service.output
        deadline = time.monotonic() + 30
        while service.group_alive() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not service.group_alive(), "sobraram processos do serviço"
    finally:
        service.kill_group()
    print(service.output)


def test_service_killed_mid_batch_resumes(tmp_path):
    subs = {k: v for k, v in class_submissions().items() if k != "bruno"}  # ana (certa), carla (em branco)
    course = tmp_path / "curso"
    make_class(course, {})
    exchange = tmp_path / "troca"
    service = Service(course, exchange, "--workers=1")
    try:
        for name, (nb, _) in subs.items():
            submit(tmp_path / "casa" / name, exchange, name, nb)
        inbound = exchange / COURSE_ID / "inbound"
        hashes = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in inbound.rglob("*.ipynb")}
        service.wait_for(r"devolutiva liberada")
    finally:
        service.kill_group()  # a máquina "cai": serviço, scheduler e workers juntos
    first = service.output
    done = re.findall(r"(\w+) / 02_atencao: .*devolutiva liberada", first)
    assert done and len(done) < len(subs), f"o lote não estava no meio:\n{first}"
    graded = course / "grading" / "autograded"
    mtimes = {n: (graded / n / CHAPTER / f"{CHAPTER}.ipynb").stat().st_mtime_ns for n in done}

    again = Service(course, exchange, "--workers=1")
    try:
        again.wait_for(r"devolutiva liberada", times=len(subs) - len(done))
        assert again.ctrl_c() <= STOP_BOUND + KILL_GRACE, again.output
    finally:
        again.kill_group()
    print(first, "\n-----\n", again.output)
    for name in done:  # nada corrigido duas vezes
        assert f"{name} / 02_atencao: corrigindo" not in again.output
        assert (graded / name / CHAPTER / f"{CHAPTER}.ipynb").stat().st_mtime_ns == mtimes[name]
    for name, (_, expected) in subs.items():  # nada perdido
        assert auto_score(course, name) == pytest.approx(expected), name
        pages = fetched_feedback(tmp_path / "casa" / name, exchange, name)
        assert len(pages) == 1, name
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        assert sorted(s.student.id for s in gb.find_assignment(CHAPTER).submissions) == sorted(subs)
    for path, digest in hashes.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} foi modificado"


def _wait_until(condition, what: str, service: Service, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if service.proc.poll() is not None:
            raise AssertionError(f"o serviço saiu antes de {what}:\n{service.output}")
        if time.monotonic() > deadline:
            raise AssertionError(f"esperando {what}:\n{service.output}")
        time.sleep(0.2)


def test_ctrl_c_mid_task_stops_within_the_bound(tmp_path):
    """Ctrl-C no meio de uma correção (um kernel rodando um laço sem fim) e ao abrir um kernel.

    O serviço, o scheduler, os workers e os kernels saem dentro do limite da parada; a entrega em
    andamento não fica com nota nem com versão corrigida e é refeita na partida seguinte. Na segunda
    vez o limite é mínimo (``--limite-parada``): quem para tudo é o vigia, à força.
    """
    from nbgrader.api import Gradebook, MissingEntry

    sol = class_submissions()["ana"][0]
    endless = nbformat.from_dict(sol)
    for cell in endless.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "sdpa":
            cell.source = "while True:\n    pass\n\n" + cell.source
    course = tmp_path / "curso"
    make_class(course, {})
    exchange = tmp_path / "troca"
    marker = course / "grading" / ".em_andamento" / f"davi__{CHAPTER}"
    graded = course / "grading" / "autograded" / "davi" / CHAPTER / f"{CHAPTER}.ipynb"

    def not_graded(output: str) -> None:
        # O nbgrader cria as linhas da entrega no gradebook (sem nota automática) e copia o notebook
        # antes de executá-lo; nada disso pode parecer uma correção terminada.
        assert marker.exists(), f"a marca da correção em andamento sumiu: ela não seria refeita\n{output}"
        if graded.exists():
            nb = nbformat.read(graded, as_version=4)
            assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), output
        with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
            try:
                sub = gb.find_submission(CHAPTER, "davi")
            except MissingEntry:
                return
            autos = [g.auto_score for nb in sub.notebooks for g in nb.grades]
            assert all(a is None for a in autos), f"nota automática gravada: {autos}\n{output}"

    service = Service(course, exchange, "--workers=1", "--timeout=3600")
    try:
        submit(tmp_path / "casa" / "davi", exchange, "davi", endless)
        service.wait_for(r"davi / 02_atencao: corrigindo")
        _wait_until(lambda: service.kernels(), "o kernel da correção", service)
        kernels = service.kernels()
        procs = [*service.descendants()]
        assert service.ctrl_c() <= STOP_BOUND + KILL_GRACE, service.output
        import psutil

        _gone, alive = psutil.wait_procs(procs, timeout=30)
        assert not alive, f"sobraram processos: {alive} (kernels: {kernels})"
    finally:
        service.kill_group()
    not_graded(service.output)

    # De novo, Ctrl-C logo que a correção refeita começa (o kernel abrindo); limite mínimo.
    again = Service(course, exchange, "--workers=1", "--timeout=3600", "--limite-parada=0.5")
    try:
        again.wait_for(r"davi / 02_atencao: corrigindo")
        procs = [*again.descendants()]
        assert again.ctrl_c() <= 0.5 + KILL_GRACE, again.output
        assert "parada à força" in again.output, again.output
        import psutil

        _gone, alive = psutil.wait_procs(procs + again.descendants(), timeout=30)
        assert not alive, f"sobraram processos: {alive}"
    finally:
        again.kill_group()
    print(service.output, "\n-----\n", again.output)
    not_graded(again.output)


def test_grader_fault_is_not_graded_nor_released(tmp_path):
    """O pacote que o kernel monta não importa (o ambiente do corretor quebrado): a entrega fica
    "NÃO corrigida, por uma falha do CORRETOR", sem nota (nem 0) e sem devolutiva liberada."""
    from nbgrader.api import Gradebook, MissingEntry

    from transformer_course.instructor import answer_key

    course = tmp_path / "curso"
    make_class(course, {})
    package = answer_key.grading_package(CHAPTER, course / "grading" / ".pacote-da-correcao", course)
    init = package / "__init__.py"
    init.write_text(init.read_text() + '\nraise ImportError("pacote quebrado de propósito pelo teste")\n')
    exchange = tmp_path / "troca"
    home = tmp_path / "casa" / "ana"
    service = Service(course, exchange, "--workers=1")
    try:
        submit(home, exchange, "ana", class_submissions()["ana"][0])
        service.wait_for(r"ana / 02_atencao: NÃO corrigida, por uma falha do CORRETOR")
        assert "pacote quebrado de propósito pelo teste" in service.output, service.output
        assert not list((exchange / COURSE_ID / "feedback").glob("*.html")), "devolutiva liberada"
        assert not list((course / "grading" / "feedback").glob(f"*/{CHAPTER}/*.html"))
        with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
            with pytest.raises(MissingEntry):
                gb.find_submission(CHAPTER, "ana")
        assert service.ctrl_c() <= STOP_BOUND + KILL_GRACE, service.output
    finally:
        service.kill_group()


def test_submission_still_being_copied_is_not_collected(tmp_path):
    """Uma pasta da troca sem ``submission_secret.txt`` (o último arquivo do ``nbgrader submit``) espera.

    Na rajada de 30 envios medida por ``scripts/bench_class.py``, o serviço recolhia pastas no meio
    da cópia: um notebook pela metade ("não é um JSON válido") ou nenhum notebook.
    """
    from transformer_course.instructor.cluster import newest_submissions

    inbound = tmp_path / "inbound"
    old = inbound / "ana+02_atencao+2026-12-01 10:00:00.000000 UTC+aaaa"
    copying = inbound / "ana+02_atencao+2026-12-01 10:05:00.000000 UTC+bbbb"
    for folder in (old, copying):
        folder.mkdir(parents=True)
        (folder / "02_atencao.ipynb").write_text('{"cells": [')  # a cópia ainda não terminou
    (old / "02_atencao.ipynb").write_text("{}")
    (old / "timestamp.txt").write_text("2026-12-01 10:00:00.000000 UTC")
    (old / "submission_secret.txt").write_text("segredo")
    (copying / "timestamp.txt").write_text("2026-12-01 10:05:00.000000 UTC")

    found = newest_submissions(inbound)
    assert list(found) == [("ana", "02_atencao")]
    assert found["ana", "02_atencao"][1] == old.name  # a nova ainda não: falta o último arquivo
    (copying / "submission_secret.txt").write_text("segredo")
    assert newest_submissions(inbound)["ana", "02_atencao"][1] == copying.name
    assert newest_submissions(tmp_path / "nao_existe") == {}
