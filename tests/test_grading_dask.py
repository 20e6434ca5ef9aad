"""Falhas num cluster Dask de verdade: ``dask scheduler``, 2 ``dask worker``, ``grade_class.py --scheduler``.

Com processos de verdade: o worker que corrige uma entrega morre com SIGKILL no meio da tarefa (o
scheduler a passa ao outro worker; no gradebook ela aparece uma vez só, com a nota certa); uma
entrega que trava (laço infinito) é cortada pelo limite por célula (20 s: numa máquina carregada,
``import torch`` já passa de 5 s) e uma que mata o próprio kernel
(``os._exit``) é relatada com o motivo, e as outras seguem; nenhuma entrega muda um byte.
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from conftest import BIN
from postgres_helpers import free_port
from test_grading_parallel import CHAPTER, class_submissions, make_class

pytestmark = pytest.mark.slow


def _with_prefix(nb, prefix: str):
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "sdpa":
            cell.source = prefix + cell.source
            return nb
    raise AssertionError("sem a célula sdpa")


def test_worker_killed_hang_and_dead_kernel(tmp_path):
    from distributed import Client
    from nbgrader.api import Gradebook

    sol, full = class_submissions()["ana"]
    subs = {
        "ana": (sol, full),
        "laco": (_with_prefix(sol, "while True:  # nunca termina\n    pass\n\n"), None),
        "morre": (_with_prefix(sol, "import os\n\nos._exit(1)\n\n"), None),
    }
    course = tmp_path / "curso"
    hashes = make_class(course, subs)
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONWARNINGS": "ignore"}
    procs = [
        subprocess.Popen(
            [str(BIN / "dask"), "scheduler", "--host=127.0.0.1", f"--port={port}", "--no-dashboard"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    ]
    grade = None
    try:
        time.sleep(2)
        for name in ("w1", "w2"):
            procs.append(
                subprocess.Popen(
                    [str(BIN / "dask"), "worker", address, "--nthreads=1", "--no-nanny", f"--name={name}"],
                    env=env,
                    cwd=tmp_path,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
            pids = client.run(os.getpid)
            grade = subprocess.Popen(
                [
                    sys.executable,
                    str(course / "scripts" / "grade_class.py"),
                    f"--scheduler={address}",
                    "--timeout=20",
                ],
                cwd=course,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            killed, since = None, None
            deadline = time.monotonic() + 600
            while killed is None and grade.poll() is None and time.monotonic() < deadline:
                # (uma lambda vai por valor ao worker; uma função deste módulo não seria importável lá)
                running = client.run(lambda dask_worker: [str(t.key) for t in dask_worker.state.executing])
                holder = next((w for w, keys in running.items() if any("-ana-" in k for k in keys)), None)
                since = (since or time.monotonic()) if holder else None
                if holder and time.monotonic() - since > 3:  # o kernel da ana já está rodando
                    killed = pids[holder]
                    os.kill(killed, signal.SIGKILL)
                time.sleep(0.2)
        out, _ = grade.communicate(timeout=900)
    finally:
        if grade is not None and grade.poll() is None:
            grade.kill()
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)
    print(out[-6000:])
    assert killed is not None, "a tarefa da ana terminou antes de o worker ser morto"
    assert grade.returncode == 0, out
    assert f"Dask: {address}, 2 worker(s); 3 entrega(s)" in out

    # A tarefa foi refeita em outro worker e a entrega está no gradebook uma vez, com a nota certa.
    log = (course / "grading" / "autograde.log").read_text()
    worker = re.search(rf"===== {CHAPTER} / ana \(worker [^:]+:(\d+)", log)
    assert worker and int(worker.group(1)) != killed, "a nota da ana veio do worker morto?"
    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        assert [s.student.id for s in gb.find_assignment(CHAPTER).submissions].count("ana") == 1
        sub = gb.find_submission(CHAPTER, "ana")
        code = [g for nb in sub.notebooks for g in nb.grades if g.cell_type == "code"]
        assert len({g.name for g in code}) == len(code)
        assert sum(g.score or 0 for g in code) == pytest.approx(full)
    assert re.search(r"^ana\s+7/7", out, re.M), out

    # O laço infinito é cortado em 20 s e relatado; o kernel morto também; os outros seguiram.
    lines = {s: [ln for ln in out.splitlines() if ln.strip().startswith(f"{s} / {CHAPTER}:")] for s in subs}
    assert any("tempo esgotado" in ln for ln in lines["laco"]), out
    assert any("kernel morreu" in ln for ln in lines["morre"]), out
    for path, digest in hashes.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} foi modificado"


def test_interrupted_attempt_is_graded_again(tmp_path):
    """Um worker morto no meio da tarefa deixa a pasta corrigida pela metade e a marca da tarefa.

    A nova tentativa não pode pular a pasta ("Skipping existing assignment"): a nota sairia de um
    notebook que nunca rodou. Reproduz o que o SIGKILL deixa, sem depender de quando ele chega.
    """
    import shutil

    from nbgrader.api import Gradebook
    from test_grading_parallel import run_grade_class

    sol, full = class_submissions()["ana"]
    course = tmp_path / "curso"
    hashes = make_class(course, {"ana": (sol, full)})
    submitted = course / "grading" / "submitted" / "ana" / CHAPTER
    half = course / "grading" / "autograded" / "ana" / CHAPTER
    shutil.copytree(submitted, half)  # a cópia que o nbgrader faz antes de executar
    marker = course / "grading" / ".em_andamento" / f"ana__{CHAPTER}"
    marker.parent.mkdir(parents=True)
    marker.touch()

    run_grade_class(course, "--workers=1")

    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        sub = gb.find_submission(CHAPTER, "ana")
        code = [g for nb in sub.notebooks for g in nb.grades if g.cell_type == "code"]
        assert sum(g.score or 0 for g in code) == pytest.approx(full)
    assert not marker.exists(), "a marca deveria sumir quando a tarefa termina"
    for path, digest in hashes.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
