"""O gradebook num PostgreSQL de verdade: ``scripts/grade_class.py --db postgresql://...`` no Dask.

O servidor é o ``postgresql`` do Debian, iniciado pelo teste (``initdb`` + ``pg_ctl`` numa pasta
temporária, 127.0.0.1, porta livre). Três entregas do capítulo 2 são corrigidas por dois workers ao
mesmo tempo; no meio do lote, assim que a primeira nota chega ao banco, o servidor é derrubado e
volta alguns segundos depois: as tarefas tentam de novo e nenhuma linha se perde ou se duplica.
Com o banco fora do ar, a correção não começa e diz, em pt-BR, qual banco faltou.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time

import pytest
from postgres_helpers import free_port, start_postgres
from test_grading_parallel import CHAPTER, class_submissions, make_class


@pytest.fixture(scope="module")
def pg():
    server = start_postgres()
    yield server
    server.close()


def _env():
    return {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}


def test_database_down_is_a_clear_error(tmp_path):
    subs = dict(list(class_submissions().items())[:1])
    course = tmp_path / "curso"
    make_class(course, subs)
    url = f"postgresql://professor@127.0.0.1:{free_port()}/notas_da_turma"
    run = subprocess.run(
        [sys.executable, str(course / "scripts" / "grade_class.py"), f"--db={url}", "--db-wait=1"],
        cwd=course,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "banco de notas (PostgreSQL professor@127.0.0.1:" in run.stdout
    assert "/notas_da_turma) não está acessível" in run.stdout
    assert not (course / "grading" / "autograded").exists(), "corrigiu sem banco"


@pytest.mark.slow
def test_class_on_postgres_survives_a_restart(pg, tmp_path):
    subs = class_submissions()
    course = tmp_path / "curso"
    hashes = make_class(course, subs)
    proc = subprocess.Popen(
        [sys.executable, str(course / "scripts" / "grade_class.py"), f"--db={pg.url}", "--workers=2"],
        cwd=course,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    restarted = False
    try:
        deadline = time.monotonic() + 900
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                graded = pg.query("SELECT count(*) FROM grade WHERE auto_score IS NOT NULL")[0][0]
            except Exception:  # noqa: BLE001 - as tabelas ainda não existem
                graded = 0
            if graded and not restarted:
                pg.stop("immediate")  # o servidor cai no meio do lote...
                time.sleep(6)
                pg.start()  # ...e volta
                restarted = True
            time.sleep(0.2)
        out, _ = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    print(out[-5000:])
    assert restarted, "o lote terminou antes de a primeira nota chegar ao banco?"
    assert proc.returncode == 0, out

    from nbgrader.api import Gradebook

    with Gradebook(pg.sqlalchemy_url) as gb:
        for student, (_, expected) in subs.items():
            sub = gb.find_submission(CHAPTER, student)
            auto = sum(g.score or 0 for nb in sub.notebooks for g in nb.grades if g.cell_type == "code")
            assert auto == pytest.approx(expected), student
    duplicated = pg.query(
        "SELECT student_id, assignment_id, count(*) FROM submitted_assignment "
        "GROUP BY student_id, assignment_id HAVING count(*) > 1"
    )
    assert duplicated == []
    per_student = pg.query(
        "SELECT sa.student_id, count(g.id) FROM grade g JOIN submitted_notebook sn ON g.notebook_id = sn.id "
        "JOIN submitted_assignment sa ON sn.assignment_id = sa.id GROUP BY sa.student_id"
    )
    counts = {student: n for student, n in per_student}
    assert set(counts) == set(subs) and len(set(counts.values())) == 1, counts
    assert pg.query("SELECT count(*) FROM student")[0][0] == len(subs)
    assert "banco de notas: PostgreSQL" in out
    assert (course / "grading" / "notas.csv").read_text().count(CHAPTER) == len(subs)
    for path, digest in hashes.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} foi modificado"
