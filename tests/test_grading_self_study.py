"""``make grade``: a autocorreção do aluno que estuda sozinho (scripts/grade.py), de ponta a ponta.

Numa cópia temporária do curso com uma pasta ``aluno/``: o capítulo 2 com um erro de verdade
(sem a divisão por √d_k) e um capítulo sem cópia de trabalho. A tabela em pt-BR mostra os pontos,
o diagnóstico da verificação, as questões abertas "a corrigir" e onde está a devolutiva; a
devolutiva HTML está em ``aluno/devolutivas/``, em pt-BR e sem os testes ocultos; e nenhum
arquivo do aluno mudou.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys

import nbformat
import pytest
from conftest import CHAPTERS, ROOT, copy_course

pytestmark = pytest.mark.slow

CHAPTER = "02_atencao"


def _digests(folder):
    return {
        p.relative_to(folder): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_make_grade_self_study(tmp_path):
    course = copy_course(tmp_path / "curso", parts=("source", "release", "solutions", "scripts"))
    nb = nbformat.read(ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "sdpa":
            cell.source = cell.source.replace(" / math.sqrt(d_k)", "")
    work = course / "aluno" / CHAPTER
    work.mkdir(parents=True)
    nbformat.write(nb, work / f"{CHAPTER}.ipynb")
    (work / "minhas_notas.md").write_text("rascunho do aluno\n")
    before = _digests(course / "aluno")
    missing = next((c for c in CHAPTERS if c != CHAPTER), None)

    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}
    args = [sys.executable, str(course / "scripts" / "grade.py"), CHAPTER] + ([missing] if missing else [])
    run = subprocess.run(args, cwd=course, env=env, capture_output=True, text=True, timeout=900)
    out = run.stdout
    print(out)
    assert run.returncode == 0, out + run.stderr

    # A tabela: exercício, tipo, pontos, situação e o porquê.
    assert re.search(r"scaled_dot_product_attention\s+visível\s+0/2\s+FALHOU", out), out
    assert re.search(r"scaled_dot_product_attention\s+oculto\s+0/3\s+FALHOU", out), out
    assert re.search(r"attention_entropy\s+visível\s+1/1\s+ok", out), out
    assert "SEM a divisão por √d_k" in out
    assert re.search(r"manual\s+\?/2\s+a corrigir", out), out
    assert "automático: 2/7" in out
    if missing:
        assert f"{missing}/{missing}.ipynb não existe" in out and "make lab" in out

    # A devolutiva do nbgrader, em pt-BR e sem os testes ocultos.
    html = course / "aluno" / "devolutivas" / f"{CHAPTER}.html"
    assert str(html) in out
    text = re.sub(r"<[^>]+>", "", html.read_text())
    assert "Nota:" in text and "Célula de teste" in text and "Score" not in text
    assert "SEM a divisão por √d_k" in text
    assert "BEGIN HIDDEN TESTS" not in text and "hidden_check(" not in text

    # Os arquivos do aluno não mudaram (a devolutiva é o único arquivo novo).
    after = _digests(course / "aluno")
    new = set(after) - set(before)
    assert {p.parts[0] for p in new} == {"devolutivas"}
    assert {p: after[p] for p in before} == before
    assert not (course / "grading" / "submitted").exists(), "a correção deve rodar numa cópia temporária"

    # O README diz: com bubblewrap, `make grade` roda confinado; sem ele, roda sem isolamento e avisa.
    from transformer_course.instructor.sandbox import sandbox_problem

    confined = sandbox_problem() is None
    assert ("Isolamento: cada notebook rodou confinado" in out) == confined, out
    assert ("SEM isolamento" in run.stderr) == (not confined), run.stderr


def test_make_grade_without_bubblewrap_warns_and_goes_on(tmp_path):
    """Sem o ``bwrap`` no PATH, ``make grade`` (o próprio notebook) não recusa como a correção da
    turma: corrige sem isolamento, avisa em stderr e diz "Isolamento: NÃO" no fim (o que o README
    promete)."""
    course = copy_course(tmp_path / "curso", parts=("source", "release", "solutions", "scripts"))
    work = course / "aluno" / CHAPTER
    work.mkdir(parents=True)
    nbformat.write(nbformat.read(ROOT / "solutions" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4),
                   work / f"{CHAPTER}.ipynb")  # fmt: skip
    bindir = tmp_path / "bin"  # só o ambiente virtual: o bwrap some do PATH
    bindir.mkdir()
    venv_bin = os.path.dirname(sys.executable)
    for name in ("nbgrader", "alembic", "python", "python3", "jupyter"):
        if os.path.exists(os.path.join(venv_bin, name)):
            (bindir / name).symlink_to(os.path.join(venv_bin, name))
    env = {k: v for k, v in os.environ.items() if k != "TRANSFORMER_COURSE_UNCONFINED"}
    env["PATH"] = str(bindir)
    run = subprocess.run(
        [sys.executable, str(course / "scripts" / "grade.py"), CHAPTER],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "correção SEM isolamento" in run.stderr, run.stderr
    assert "Isolamento: NÃO (sem bubblewrap)" in run.stdout, run.stdout
    assert "automático: 7/7" in run.stdout, run.stdout
