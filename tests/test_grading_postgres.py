"""O gradebook num PostgreSQL de verdade: ``scripts/grade_class.py --db postgresql://...`` no Dask.

O servidor é o ``postgresql`` do Debian, iniciado pelo teste (``initdb`` + ``pg_ctl`` numa pasta
temporária, 127.0.0.1, porta livre). Três entregas do capítulo 2 são corrigidas por dois workers ao
mesmo tempo; no meio do lote, assim que a primeira nota chega ao banco, o servidor é derrubado e
volta alguns segundos depois: as tarefas tentam de novo e nenhuma linha se perde ou se duplica.
Se ele cai no meio do lote e não volta, a correção para com um erro em pt-BR que diz qual banco
faltou (sem a senha) e nada fica pela metade; com o banco de volta, a mesma correção termina o que
faltou, uma vez só. Com o banco fora do ar, a correção não começa e diz, em pt-BR, qual banco faltou.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time

import pytest
from postgres_helpers import free_port, start_postgres
from test_grading_parallel import CHAPTER, class_submissions, make_class, run_grade_class


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


def _code_grades(url: str, students) -> dict:
    """Aluno -> notas automáticas das células de código (None = sem nota), ou None sem entrega no banco."""
    from nbgrader.api import Gradebook, MissingEntry

    out = {}
    with Gradebook(url) as gb:
        for student in students:
            try:
                sub = gb.find_submission(CHAPTER, student)
            except MissingEntry:
                out[student] = None
                continue
            out[student] = [g.auto_score for nb in sub.notebooks for g in nb.grades if g.cell_type == "code"]
    return out


@pytest.mark.slow
def test_database_stays_down_mid_batch(tmp_path):
    """O PostgreSQL cai no meio do lote e não volta: erro claro, código 1 e nada pela metade."""
    subs = class_submissions()
    course = tmp_path / "curso"
    hashes = make_class(course, subs)
    pg = start_postgres()
    secret = "senha-da-turma-123"
    url = f"postgresql://{pg.user}:{secret}@127.0.0.1:{pg.port}/{pg.database}"  # trust: a senha é ignorada
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(course / "scripts" / "grade_class.py"),
                f"--db={url}",
                "--db-wait=3",
                "--workers=2",
            ],
            cwd=course,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        stopped = False
        try:
            deadline = time.monotonic() + 900
            while proc.poll() is None and time.monotonic() < deadline:
                if not stopped:
                    try:
                        graded = pg.query("SELECT count(*) FROM grade WHERE auto_score IS NOT NULL")[0][0]
                    except Exception:  # noqa: BLE001 - as tabelas ainda não existem
                        graded = 0
                    if graded:
                        pg.stop("immediate")  # o servidor cai no meio do lote e fica fora do ar
                        stopped = True
                time.sleep(0.2)
            out, _ = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
        print(out[-5000:])
        assert stopped, "o lote terminou antes de a primeira nota chegar ao banco?"

        # Erro claro, em pt-BR, com o nome do banco e sem a senha; código de saída diferente de 0.
        assert proc.returncode == 1, out
        assert "Correção interrompida: o banco de notas" in out
        assert f"(PostgreSQL {pg.user}@127.0.0.1:{pg.port}/{pg.database}) não está acessível" in out
        assert "Traceback" not in out, out
        assert "db upgrade" not in out, "o conselho enganoso do nbgrader não é o motivo"
        logs = [course / "grading" / "autograde.log", course / "grading" / "dask-workers.log"]
        for text in [out] + [p.read_text(errors="replace") for p in logs if p.exists()]:
            assert secret not in text, "a senha do banco apareceu na saída ou nos logs"

        # Nada pela metade: o banco volta só para conferir o estado que a queda deixou.
        pg.start()
        marks = course / "grading" / ".em_andamento"
        grades = _code_grades(pg.sqlalchemy_url, subs)
        complete = set()
        for student, scores in grades.items():
            if scores is None or all(score is None for score in scores):
                continue  # sem nota nenhuma: não corrigida
            assert all(score is not None for score in scores), f"{student}: nota parcial no banco: {scores}"
            assert sum(scores) == pytest.approx(subs[student][1]), student
            complete.add(student)
        looks_done = {
            student
            for student in subs
            if (course / "grading" / "autograded" / student / CHAPTER / f"{CHAPTER}.ipynb").exists()
            and not (marks / f"{student}__{CHAPTER}").exists()
        }
        assert looks_done <= complete, f"versão corrigida sem as notas no banco: {looks_done - complete}"
        unfinished = set(subs) - looks_done
        assert unfinished, "a queda não pegou nenhuma entrega no meio?"
        for student in unfinished:
            assert f"  {student} / {CHAPTER}\n" in out, f"{student} não aparece entre as não corrigidas"
        assert not (course / "grading" / "notas.csv").exists(), "exportou notas com o banco fora do ar"

        # Com o banco de volta, a mesma correção termina o que faltou, uma vez só.
        run = run_grade_class(course, f"--db={url}", "--db-wait=3", "--workers=2")
        assert "ERRO" not in run.stdout
        assert secret not in run.stdout + run.stderr
        grades = _code_grades(pg.sqlalchemy_url, subs)
        for student, (_, expected) in subs.items():
            assert grades[student] and all(score is not None for score in grades[student]), student
            assert sum(grades[student]) == pytest.approx(expected), student
            html = course / "grading" / "feedback" / student / CHAPTER / f"{CHAPTER}.html"
            assert html.exists(), f"sem devolutiva para {student}"
        assert not any(marks.iterdir()), f"marcas de correção interrompida sobraram: {list(marks.iterdir())}"
        log = (course / "grading" / "autograde.log").read_text()
        sections = dict(
            re.findall(r"^===== " + CHAPTER + r" / (\w+) [^\n]*\n(.*?)(?=^===== |\Z)", log, re.M | re.S)
        )
        assert sorted(sections) == sorted(subs), "cada entrega é uma tarefa, uma vez só"
        for student, text in sections.items():
            skipped = "Skipping existing assignment" in text
            assert skipped == (student in looks_done), (student, looks_done, text[-2000:])
        assert (
            pg.query(
                "SELECT student_id, assignment_id, count(*) FROM submitted_assignment "
                "GROUP BY student_id, assignment_id HAVING count(*) > 1"
            )
            == []
        )
        per_student = pg.query(
            "SELECT sa.student_id, count(g.id) FROM grade g "
            "JOIN submitted_notebook sn ON g.notebook_id = sn.id "
            "JOIN submitted_assignment sa ON sn.assignment_id = sa.id GROUP BY sa.student_id"
        )
        counts = dict(per_student)
        assert set(counts) == set(subs) and len(set(counts.values())) == 1, counts
        assert (course / "grading" / "notas.csv").read_text().count(CHAPTER) == len(subs)
        for path, digest in hashes.items():
            assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} foi modificado"
    finally:
        pg.close()
