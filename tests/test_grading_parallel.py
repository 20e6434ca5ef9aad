"""Correção em paralelo no mesmo gradebook SQLite: ``scripts/grade_class.py --jobs N``.

Cada processo é um ``nbgrader autograde 02_atencao --student <aluno>``; todos escrevem no mesmo
``gradebook.db``. O teste confere que cada aluno recebe a mesma nota que teria em sequência e que
nenhuma entrega se perdeu. O relatório diz quantas entregas tiveram de ser refeitas por
"database is locked" (o script as refaz sozinhas, em sequência).
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys

import nbformat
import pytest
from conftest import ROOT, copy_course

pytestmark = pytest.mark.slow

CHAPTER = "02_atencao"


def test_parallel_autograde_same_sqlite(tmp_path):
    from nbgrader.api import Gradebook

    course = copy_course(tmp_path / "curso", parts=("source", "release", "solutions", "scripts"))
    for extra in [p for p in (course / "source").iterdir() if p.name != CHAPTER]:
        shutil.rmtree(extra)
    sol = nbformat.read(ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    release = nbformat.read(ROOT / "release" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    wrong = copy.deepcopy(sol)
    for cell in wrong.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "sdpa":
            cell.source = cell.source.replace(" / math.sqrt(d_k)", "")
    subs = {"ana": (sol, 7), "bruno": (wrong, 2), "carla": (release, 0), "davi": (sol, 7)}
    for student, (nb, _) in subs.items():
        target = course / "grading" / "submitted" / student / CHAPTER / f"{CHAPTER}.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(nb, target)

    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(
        [sys.executable, str(course / "scripts" / "grade_class.py"), "--jobs=2"],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"paralelo: 2 processos; \d+ entrega", run.stdout)

    with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
        for student, (_, expected) in subs.items():
            sub = gb.find_submission(CHAPTER, student)
            auto = sum(g.score or 0 for nb in sub.notebooks for g in nb.grades if g.cell_type == "code")
            assert auto == pytest.approx(expected), student
            assert (course / "grading" / "autograded" / student / CHAPTER / f"{CHAPTER}.ipynb").exists()
