"""``make grade-class`` no Dask dá as mesmas notas que a correção em sequência do nbgrader.

As mesmas três entregas do capítulo 2 (gabarito, em branco, sem a divisão por √d_k) são corrigidas
duas vezes, em dois cursos temporários: por ``scripts/grade_class.py`` no ``LocalCluster`` embutido
(2 workers, uma tarefa por aluno) e por ``scripts/grade_class.py --sequencial`` (o
``nbgrader autograde`` de sempre). As notas de cada célula, o relatório e o ``notas.csv`` têm de
coincidir, e nenhuma entrega muda um byte.
"""

from __future__ import annotations

import copy
import hashlib
import os
import shutil
import subprocess
import sys

import nbformat
import pytest
from conftest import ROOT, copy_course

pytestmark = pytest.mark.slow

CHAPTER = "02_atencao"


def class_submissions() -> dict:
    """Aluno -> (notebook, pontos automáticos esperados): certo, em branco, errado."""
    sol = nbformat.read(ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    release = nbformat.read(ROOT / "release" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    wrong = copy.deepcopy(sol)
    for cell in wrong.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "sdpa":
            cell.source = cell.source.replace(" / math.sqrt(d_k)", "")
    return {"ana": (sol, 7), "bruno": (wrong, 2), "carla": (release, 0)}


def make_class(course, subs) -> dict:
    """Cópia do curso só com o capítulo 2 e as entregas; devolve o hash de cada entrega."""
    copy_course(course, parts=("source", "release", "solutions", "scripts"))
    for extra in [p for p in (course / "source").iterdir() if p.name != CHAPTER]:
        shutil.rmtree(extra)
    hashes = {}
    for student, (nb, _) in subs.items():
        target = course / "grading" / "submitted" / student / CHAPTER / f"{CHAPTER}.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(nb, target)
        hashes[target] = hashlib.sha256(target.read_bytes()).hexdigest()
    return hashes


def run_grade_class(course, *args, timeout=1200) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(
        [sys.executable, str(course / "scripts" / "grade_class.py"), *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    print(run.stdout[-4000:])
    assert run.returncode == 0, run.stdout + run.stderr
    return run


def cell_scores(db_url, students) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        return {
            student: {
                g.name: (g.cell_type, g.score)
                for nb in gb.find_submission(CHAPTER, student).notebooks
                for g in nb.grades
            }
            for student in students
        }


def test_dask_gives_the_same_scores_as_sequential(tmp_path):
    subs = class_submissions()
    scores, reports = {}, {}
    for mode, args in (("dask", ["--workers=2"]), ("sequencial", ["--sequencial"])):
        course = tmp_path / mode
        hashes = make_class(course, subs)
        run = run_grade_class(course, *args)
        if mode == "dask":
            assert "Dask: LocalCluster embutido, 2 worker(s); 3 entrega(s)" in run.stdout
        reports[mode] = run.stdout[: run.stdout.index("(pontos automáticos")]
        scores[mode] = cell_scores(f"sqlite:///{course / 'grading' / 'gradebook.db'}", subs)
        for student, (_, expected) in subs.items():
            auto = sum(score or 0 for kind, score in scores[mode][student].values() if kind == "code")
            assert auto == pytest.approx(expected), (mode, student, scores[mode][student])
            html = course / "grading" / "feedback" / student / CHAPTER / f"{CHAPTER}.html"
            assert html.exists(), f"{mode}: sem devolutiva para {student}"
        csv = (course / "grading" / "notas.csv").read_text()
        assert all(student in csv for student in subs)
        for path, digest in hashes.items():
            assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} foi modificado"
    assert scores["dask"] == scores["sequencial"]
    assert reports["dask"].splitlines()[-4:] == reports["sequencial"].splitlines()[-4:]
